"""Voice cloning's 3 to 60 s rule, with clips of real speech made by eSpeak NG, in every
container PyAV writes (wav, mp3, m4a, ogg, webm, flac). The clone endpoint is Parley's;
the cloning engine behind it is the fake vLLM-Omni (eSpeak NG cannot clone)."""

from __future__ import annotations

import re

import pytest

from parley.local.demo.children import Child
from tests.api.speech.conftest import Tenants
from tests.api.speech.test_voice_clones import clone, uploads
from tests.clips import FORMATS
from tests.engines.speech_clips import espeak_pcm, speech_clip

pytestmark = pytest.mark.engines
MEASURED = re.compile(r"lasts (\d+\.\d\d) seconds")


@pytest.fixture(scope="session")
def spoken(speech_engine_server: Child) -> bytes:
    return espeak_pcm(speech_engine_server.v1)


@pytest.mark.parametrize("container", sorted(FORMATS))
async def test_a_spoken_clip_of_3_to_60_seconds_is_cloned(
    tenants: Tenants, spoken: bytes, container: str
) -> None:
    status, voice = await clone(tenants, tenants.key_a, speech_clip(spoken, 4.5, container))
    assert status == 200, voice
    assert voice["duration_seconds"] == pytest.approx(4.5, abs=0.1)
    assert uploads(tenants) == 1


@pytest.mark.parametrize("seconds", [2.5, 61.0])
@pytest.mark.parametrize("container", sorted(FORMATS))
async def test_a_spoken_clip_outside_3_to_60_seconds_is_a_400_stating_its_length(
    tenants: Tenants, spoken: bytes, container: str, seconds: float
) -> None:
    status, body = await clone(tenants, tenants.key_a, speech_clip(spoken, seconds, container))
    assert status == 400
    assert body["error"]["param"] == "file"
    found = MEASURED.search(body["error"]["message"])
    assert found is not None, body
    assert float(found.group(1)) == pytest.approx(seconds, abs=0.1)
    assert uploads(tenants) == 0
