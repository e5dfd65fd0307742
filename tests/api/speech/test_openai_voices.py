"""OpenAI's own voice API (openai-python 3's ``client.audio.voices``) against Parley: its
field names beside the spec's, its reply shapes beside Parley's."""

from __future__ import annotations

import openai
import pytest

from tests.api.speech.conftest import Tenants
from tests.api.speech.test_voice_clones import FORM, clone, form_body, post_raw, uploads
from tests.clips import clip

PRO = {"model": "tts-pro"}


async def test_the_sdk_creates_speaks_with_and_deletes_a_clone(tenants: Tenants) -> None:
    client = tenants.gateway.client(tenants.key_a)
    voice = await client.audio.voices.create(
        name="Anna",
        audio_sample=("anna.mp3", clip("mp3", 4.0), "audio/mpeg"),
        consent="cons_1234",
        extra_query=PRO,
    )
    voice_id = f"g{tenants.group_a}__Anna"
    assert (voice.id, voice.name, voice.object, voice.type) == (
        voice_id,
        "Anna",
        "audio.voice",
        "audio_sample",
    )
    extra = voice.model_extra or {}
    assert extra["label"] == "Anna" and extra["builtin"] is False and voice.created_at > 0
    engine = tenants.engines.omni
    assert engine.uploaded[voice_id.lower()]["consent"] == "cons_1234"
    (stored,) = await tenants.gateway.services.store.list_clones()
    assert stored.consent == "cons_1234" and stored.label == "Anna"

    await client.audio.speech.create(model="tts-pro", input="Hello there.", voice=voice.id)
    assert engine.spoken[-1] == voice_id.lower()

    deleted = await client.audio.voices.delete(voice.id, extra_query=PRO)
    assert (deleted.id, deleted.object, deleted.deleted) == (
        voice_id,
        "audio.voice.deleted",
        True,
    )
    assert engine.uploaded == {} and await tenants.gateway.services.store.list_clones() == []


async def test_the_sdk_may_name_the_model_in_the_form(tenants: Tenants) -> None:
    client = tenants.gateway.client(tenants.key_a)
    voice = await client.audio.voices.create(
        name="Bea",
        audio_sample=("bea.wav", clip("wav", 4.0), "audio/wav"),
        consent="cons_5678",
        type="audio_sample",
        extra_body=PRO,
    )
    assert voice.id == f"g{tenants.group_a}__Bea"


async def test_the_specs_rules_hold_under_openais_names(tenants: Tenants) -> None:
    client = tenants.gateway.client(tenants.key_a)
    with pytest.raises(openai.BadRequestError) as short:
        await client.audio.voices.create(
            name="Anna", audio_sample=clip("wav", 2.0), consent="c", extra_query=PRO
        )
    assert short.value.body["param"] == "audio_sample"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as unnamed:
        await client.audio.voices.create(name="Anna", audio_sample=clip("wav", 4.0), consent="c")
    assert "query param model is required" in unnamed.value.message
    with pytest.raises(openai.BadRequestError) as label:
        await client.audio.voices.create(
            name="not a label!", audio_sample=clip("wav", 4.0), consent="c", extra_query=PRO
        )
    assert label.value.body["param"] == "label"  # type: ignore[index]
    assert uploads(tenants) == 0


async def test_the_specs_names_still_work_and_consent_is_recorded(tenants: Tenants) -> None:
    status, voice = await clone(tenants, tenants.key_a, clip("wav", 4.0), extra={"consent": "ok"})
    assert status == 200 and voice["name"] == voice["label"] == "Anna"
    assert voice["type"] == "audio_sample"
    (stored,) = await tenants.gateway.services.store.list_clones()
    assert stored.consent == "ok"


@pytest.mark.parametrize(
    ("parts", "param"),
    [
        ([("label", b"Anna"), ("name", b"Bert")], "name"),
        ([("label", b"Anna"), ("type", b"prompt")], "type"),
        ([("label", b"Anna"), ("consent", b"c" * 301)], "consent"),
    ],
)
async def test_what_cannot_be_honoured_is_a_400_naming_the_field(
    tenants: Tenants, parts: list[tuple[str, bytes]], param: str
) -> None:
    body = form_body([("model", b"tts-pro"), *parts, ("file", clip("wav", 4.0))])
    status, error = await post_raw(tenants, "/audio/voices", FORM, body)
    assert status == 400 and error["error"]["param"] == param
    assert uploads(tenants) == 0


async def test_equal_label_and_name_are_one_field(tenants: Tenants) -> None:
    parts = [("model", b"tts-pro"), ("label", b"Anna"), ("name", b"Anna")]
    body = form_body([*parts, ("file", clip("wav", 4.0))])
    status, voice = await post_raw(tenants, "/audio/voices", FORM, body)
    assert status == 200 and voice["id"] == f"g{tenants.group_a}__Anna"
