"""GET /v1/audio/voices: the spec's root and records, coverage rules, privacy, failures."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import aiohttp

from parley.domain.voices import Clone
from tests.api.speech.conftest import Tenants


async def get_voices(tenants: Tenants, key: str, query: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session:
        url = f"{tenants.gateway.v1}/audio/voices{query}"
        async with session.get(url, headers={"Authorization": f"Bearer {key}"}) as reply:
            return reply.status, await reply.json()


async def plant_clone(tenants: Tenants, group_id: int, label: str) -> None:
    """A clone as the clone endpoint leaves it: on the engine and in the registry."""
    name = f"g{group_id}__{label}".lower()
    tenants.engines.omni.uploaded[name] = {"name": name, "consent": "c", "created_at": 1}
    await tenants.gateway.services.clones.add(
        Clone(
            group_id,
            "tts-pro",
            label,
            f"g{group_id}__{label}",
            name,
            "omni",
            4000,
            datetime.now(UTC),
        )
    )


async def test_without_model_it_is_a_400_saying_the_query_param_is_required(
    tenants: Tenants,
) -> None:
    status, body = await get_voices(tenants, tenants.key_a, "")
    assert status == 400
    assert "query param model is required" in body["error"]["message"]
    assert body["error"]["param"] == "model"


async def test_models_that_are_not_local_tts_models_are_404(tenants: Tenants) -> None:
    for model in ("chat-large", "tts-plain"):
        status, body = await get_voices(tenants, tenants.key_a, f"?model={model}")
        assert (status, body["error"]["code"]) == (404, "voices_not_supported"), model
    status, body = await get_voices(tenants, tenants.key_a, "?model=no-such-model")
    assert (status, body["error"]["code"]) == (404, "model_not_found")


async def test_the_pro_roster_is_merged_with_its_catalogue(tenants: Tenants) -> None:
    tenants.engines.omni.uploaded["stranger"] = {"name": "stranger"}  # not made through Parley
    status, body = await get_voices(tenants, tenants.key_a, "?model=pro")
    assert status == 200 and body["supports_custom"] is True
    voices = {voice["id"]: voice for voice in body["voices"]}
    assert list(voices) == ["vivian", "ryan", "aiden", "serena"]
    assert voices["vivian"] == {
        "id": "vivian",
        "label": "Vivian",
        "builtin": True,
        "status": "ready",
        "lang": "en",
        "lang_key": "en",
        "label_en": "Vivian",
        "gender": "F",
        "age": "young",
        "category": "audiobooks",
        "categories": ["audiobooks"],
        "tags": ["bright", "warm", "clear", "friendly", "expressive"],
        "description": "A bright, warm young voice for stories and long reads.",
        "description_en": "A bright, warm young voice for stories and long reads.",
    }
    assert voices["aiden"] == {
        "id": "aiden",
        "label": "aiden",
        "builtin": True,
        "status": "ready",
        "lang": None,
    }


async def test_the_fast_model_marks_only_curated_styles_and_hides_imported_ones(
    tenants: Tenants,
) -> None:
    status, body = await get_voices(tenants, tenants.key_a, "?model=tts-fast")
    assert status == 200 and body["supports_custom"] is False
    voices = {voice["id"]: voice for voice in body["voices"]}
    assert len(voices) == 10 and "imported_narrator" not in voices
    assert voices["M1"]["status"] == "ready" and voices["M1"]["lang_key"] == "tr"
    assert voices["M2"] == {"id": "M2", "label": "M2", "builtin": True, "lang": None}


async def test_each_group_sees_only_its_own_clones(tenants: Tenants) -> None:
    await plant_clone(tenants, tenants.group_a, "Anna")
    await plant_clone(tenants, tenants.group_b, "bert")
    _, seen_by_a = await get_voices(tenants, tenants.key_a, "?model=tts-pro")
    _, seen_by_b = await get_voices(tenants, tenants.key_b, "?model=tts-pro")
    clones_a = [v for v in seen_by_a["voices"] if not v["builtin"]]
    clones_b = [v for v in seen_by_b["voices"] if not v["builtin"]]
    anna = f"g{tenants.group_a}__Anna"
    assert clones_a == [{"id": anna, "label": "Anna", "builtin": False, "status": "ready"}]
    assert [v["id"] for v in clones_b] == [f"g{tenants.group_b}__bert"]


async def test_an_unreachable_engine_is_a_502(tenants: Tenants) -> None:
    await tenants.engines.omni.stop()
    status, body = await get_voices(tenants, tenants.key_a, "?model=tts-pro")
    assert status == 502 and body["error"]["type"] == "upstream_error"


async def test_an_engine_that_goes_down_mid_list_is_a_502(tenants: Tenants) -> None:
    tenants.engines.omni.drop_voice_list = True
    status, body = await get_voices(tenants, tenants.key_a, "?model=tts-pro")
    assert status == 502 and "upstream" in body["error"]["message"]
