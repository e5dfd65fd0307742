"""Another group's clone is never spoken with, however its id is spelled and whether or
not the engine's roster can be read.

Group A clones ``Kestrel``: the engine holds ``g<a>__kestrel``. Group B then asks for it
in spellings the engine folds back to that name (upper case, the long s, the Kelvin sign,
fullwidth forms), on a model whose roster answers 503 and on one with no voice listing,
neither with a catalogue: so nothing but the id's shape can tell Parley it is a clone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.api.harness import Gateway
from tests.api.speech.conftest import Engines, Tenants, speech_config
from tests.api.speech.test_speech import TEXT, post_speech
from tests.api.speech.test_voice_clones import clone, delete
from tests.clips import clip
from tests.upstreams.openai_audio import FakeAudioEngine, Folding
from tests.upstreams.supertonic import FakeSupertonic

LABEL = "Kestrel"
KELVIN, LONG_S = "\u212a", "\u017f"
WIDE = {ord(c): ord(c) + 0xFEE0 for c in "0123456789_gGKESTREL"}
"""ASCII to its fullwidth form (U+FF01 to U+FF5E)."""
SPELLINGS: dict[Folding, tuple[str, ...]] = {
    "lower": ("G{a}__KESTREL", "G{a}__" + KELVIN + "estrel"),
    "casefold": ("G{a}__KE" + LONG_S + "TREL", "G{a}__" + KELVIN + "ESTREL"),
    "unicode": (
        "\uff47{a}__kestrel",
        "G{a}__KESTREL".translate(WIDE),
        "g{wide}\uff3f\uff3f" + KELVIN + "e" + LONG_S + "trel",
    ),
}


@dataclass
class Setting:
    tenants: Tenants
    engine: FakeAudioEngine

    def spelled(self, spelling: str) -> str:
        a = str(self.tenants.group_a)
        return spelling.format(a=a, wide=a.translate(WIDE))


@pytest.fixture
async def setting(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setting]:
    """Group A's clone ``Kestrel`` on an engine folding names as ``request.param`` says,
    whose roster then answers 503; ``tts-pro`` has no catalogue, ``tts-raw`` (the same
    engine) no voice listing either."""
    async with (
        FakeAudioEngine(voice_folding=request.param) as omni,
        FakeSupertonic() as tonic,
        FakeAudioEngine.plain() as plain,
    ):
        engines = Engines(omni, tonic, plain)
        config = speech_config(engines, "http://127.0.0.1:9/v1", tmp_path)
        omni_channel = next(c for c in config["channels"] if c["name"] == "omni")
        omni_channel["models"].append({"name": "tts-raw", "upstream": "qwen3-tts"})
        pro = next(m for m in config["models"] if m["name"] == "tts-pro")
        del pro["audio"]["voices_catalogue"]
        raw = {"name": "tts-raw", "kind": "speech", "audio": {"voice_listing": False}}
        config["models"].append(raw)
        gateway = await Gateway.start(config)
        try:
            group_a, group_b = await gateway.group("alpha"), await gateway.group("beta")
            key_a, key_b = await gateway.key(group_a), await gateway.key(group_b)
            tenants = Tenants(gateway, engines, key_a, key_b, group_a.id, group_b.id)
            status, voice = await clone(tenants, key_a, clip("wav", 4.0), label=LABEL)
            assert status == 200, voice
            omni.roster_status = 503
            yield Setting(tenants, omni)
        finally:
            await gateway.stop()


@pytest.mark.parametrize("setting", list(SPELLINGS), indirect=True)
async def test_a_clone_is_its_groups_alone_however_the_engine_folds_its_id(
    setting: Setting,
) -> None:
    tenants, engine = setting.tenants, setting.engine
    held = f"g{tenants.group_a}__kestrel"
    for spelling in SPELLINGS[engine.voice_folding]:
        voice = setting.spelled(spelling)
        assert engine.fold(voice) == held, "the engine would speak with group A's clone"
        for model in ("tts-pro", "tts-raw"):
            body = {"model": model, "input": TEXT, "voice": voice}
            status, _, audio = await post_speech(tenants, body, tenants.key_b)
            assert status == 200 and audio[:4] == b"RIFF", (voice, model)
            assert engine.spoken[-1] == engine.default_voice, (voice, model)
            assert "voice" not in engine.last_request.body
        status, error = await delete(tenants, tenants.key_b, voice)
        assert status == 403 and error["error"]["param"] == "voice_id", voice
        assert held in engine.uploaded
        # its own group gets it in any spelling, sent under the engine's name for it
        body = {"model": "tts-pro", "input": TEXT, "voice": voice}
        status, _, _ = await post_speech(tenants, body, tenants.key_a)
        assert status == 200 and engine.last_request.body["voice"] == held
        assert engine.spoken[-1] == held
