"""POST and DELETE /v1/audio/voices over raw HTTP, with two groups and clips in every container."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.api.harness import Gateway
from tests.api.speech.conftest import Engines, Tenants, speech_config
from tests.clips import FORMATS, clip
from tests.upstreams.tones import sine, wav


async def clone(
    tenants: Tenants,
    key: str,
    audio: bytes,
    *,
    label: str = "Anna",
    model: str = "tts-pro",
    filename: str = "clip.bin",
    extra: dict[str, str] | None = None,
    in_query: bool = False,
) -> tuple[int, Any]:
    form = aiohttp.FormData()
    query = f"?model={model}" if in_query else ""
    if not in_query:
        form.add_field("model", model)
    form.add_field("label", label)
    form.add_field("file", audio, filename=filename, content_type="application/octet-stream")
    for name, value in (extra or {}).items():
        form.add_field(name, value)
    async with aiohttp.ClientSession() as session:
        url = f"{tenants.gateway.v1}/audio/voices{query}"
        async with session.post(url, data=form, headers=_auth(key)) as reply:
            return reply.status, orjson.loads(await reply.read())


async def delete(
    tenants: Tenants, key: str, voice_id: str, model: str = "tts-pro"
) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session:
        url = f"{tenants.gateway.v1}/audio/voices/{voice_id}?model={model}"
        async with session.delete(url, headers=_auth(key)) as reply:
            return reply.status, orjson.loads(await reply.read())


async def listed(tenants: Tenants, key: str) -> list[str]:
    async with aiohttp.ClientSession() as session:
        url = f"{tenants.gateway.v1}/audio/voices?model=tts-pro"
        async with session.get(url, headers=_auth(key)) as reply:
            return [v["id"] for v in (await reply.json())["voices"] if not v["builtin"]]


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def uploads(tenants: Tenants) -> int:
    return sum(
        1 for r in tenants.engines.omni.requests if r.method == "POST" and "voices" in r.path
    )


@pytest.mark.parametrize("container", sorted(FORMATS))
async def test_a_clip_in_any_container_is_cloned_under_the_groups_id(
    tenants: Tenants, container: str
) -> None:
    status, voice = await clone(
        tenants, tenants.key_a, clip(container, 4.0), extra={"transcript": "hello there"}
    )
    voice_id = f"g{tenants.group_a}__Anna"
    assert status == 200, voice
    assert voice["id"] == voice_id and voice["label"] == "Anna" and voice["builtin"] is False
    assert voice["duration_seconds"] == pytest.approx(4.0, abs=0.1)
    uploaded = tenants.engines.omni.uploaded[voice_id.lower()]
    assert uploaded["ref_text"] == "hello there"
    assert await listed(tenants, tenants.key_a) == [voice_id]
    assert await listed(tenants, tenants.key_b) == []


async def test_a_streamed_wav_header_is_measured_by_its_samples(tenants: Tenants) -> None:
    streamed = wav(sine(5.0, 16000), 16000, streamed=True)
    status, voice = await clone(tenants, tenants.key_a, streamed, filename="clip.mp3")
    assert status == 200 and voice["duration_seconds"] == pytest.approx(5.0)


@pytest.mark.parametrize("seconds", [2.0, 61.0])
async def test_a_clip_outside_3_to_60_seconds_is_a_400_stating_its_length(
    tenants: Tenants, seconds: float
) -> None:
    status, body = await clone(tenants, tenants.key_a, clip("mp3", seconds))
    assert status == 400 and f"{seconds:.2f} seconds" in body["error"]["message"]
    assert uploads(tenants) == 0


async def test_unreadable_audio_is_a_400_before_any_engine_call(tenants: Tenants) -> None:
    status, body = await clone(tenants, tenants.key_a, b"RIFF" + b"\0" * 5000, filename="a.wav")
    assert status == 400 and body["error"]["param"] == "file"
    assert uploads(tenants) == 0


async def test_an_upload_past_the_cap_is_a_413(tenants: Tenants) -> None:
    status, body = await clone(tenants, tenants.key_a, b"\0" * (10_485_760 + 1))
    assert status == 413 and body["error"]["code"] == "payload_too_large"


async def test_a_clip_longer_than_the_engine_takes_is_cut_and_its_transcript_dropped(
    tenants: Tenants,
) -> None:
    status, _ = await clone(
        tenants, tenants.key_a, clip("ogg", 45.0), extra={"transcript": "a long read"}
    )
    uploaded = tenants.engines.omni.uploaded[f"g{tenants.group_a}__anna"]
    assert status == 200 and uploaded["mime_type"] == "audio/wav" and "ref_text" not in uploaded


async def test_a_transcript_is_kept_from_an_engine_that_does_not_clone_with_one(
    engines: Engines, tmp_path: Path
) -> None:
    config = speech_config(engines, "http://127.0.0.1:9/v1", tmp_path)
    pro = next(model for model in config["models"] if model["name"] == "tts-pro")
    pro["audio"]["transcript_cloning"] = False
    gateway = await Gateway.start(config)
    try:
        group = await gateway.group("alpha")
        key = await gateway.key(group)
        tenants = Tenants(gateway, engines, key, key, group.id, group.id)
        status, voice = await clone(
            tenants, key, clip("wav", 4.0), extra={"transcript": "hello there"}
        )
        assert status == 200, voice
        uploaded = engines.omni.uploaded[f"g{group.id}__anna"]
        assert "ref_text" not in uploaded and uploaded["mime_type"] == "audio/wav"
    finally:
        await gateway.stop()


async def test_a_caller_out_of_requests_is_refused_before_its_clip_is_read(
    tenants: Tenants,
) -> None:
    key = await tenants.gateway.key(await tenants.gateway.group("tight", rpm=1))
    status, _ = await clone(tenants, key, clip("wav", 4.0))
    assert status == 200
    # Read and probed, this clip would be a 400 (it is not audio); refused first, a 429.
    status, body = await clone(tenants, key, b"not audio at all", label="Other")
    assert status == 429 and body["error"]["code"] == "rate_limit_exceeded"
    assert uploads(tenants) == 1


async def test_labels_are_checked_and_unique_per_group_ignoring_case(tenants: Tenants) -> None:
    status, body = await clone(tenants, tenants.key_a, clip("wav", 4.0), label="no spaces!")
    assert status == 400 and body["error"]["param"] == "label"
    assert (await clone(tenants, tenants.key_a, clip("wav", 4.0)))[0] == 200
    status, body = await clone(tenants, tenants.key_a, clip("wav", 4.0), label="anna")
    assert status == 409 and body["error"]["code"] == "voice_exists"
    assert (await clone(tenants, tenants.key_b, clip("wav", 4.0), label="anna"))[0] == 200


async def test_models_that_cannot_clone_say_so(tenants: Tenants) -> None:
    status, body = await clone(tenants, tenants.key_a, clip("wav", 4.0), model="tts-fast")
    assert status == 400 and "cannot clone" in body["error"]["message"]
    status, _ = await clone(tenants, tenants.key_a, clip("wav", 4.0), model="tts-plain")
    assert status == 404


async def test_a_clone_speaks_for_its_group_only(tenants: Tenants) -> None:
    _, voice = await clone(tenants, tenants.key_a, clip("flac", 4.0))
    body = {"model": "tts-pro", "input": "hi there", "voice": voice["id"]}
    for key, expected in ((tenants.key_a, voice["id"].lower()), (tenants.key_b, None)):
        async with aiohttp.ClientSession() as session:
            url = f"{tenants.gateway.v1}/audio/speech"
            async with session.post(url, json=body, headers=_auth(key)) as reply:
                assert reply.status == 200
        assert tenants.engines.omni.last_request.body.get("voice") == expected


async def test_deleting_refuses_builtins_and_other_groups_and_404s_the_unknown(
    tenants: Tenants,
) -> None:
    _, voice = await clone(tenants, tenants.key_a, clip("wav", 4.0))
    assert (await delete(tenants, tenants.key_a, "vivian"))[0] == 403
    assert (await delete(tenants, tenants.key_b, voice["id"]))[0] == 403
    assert (await delete(tenants, tenants.key_a, f"g{tenants.group_a}__nobody"))[0] == 404
    assert (await delete(tenants, tenants.key_a, "nobody"))[0] == 404
    assert tenants.engines.omni.uploaded, "nothing was deleted"
    status, body = await delete(tenants, tenants.key_a, voice["id"])
    assert status == 200
    assert body == {"id": voice["id"], "object": "audio.voice.deleted", "deleted": True}
    assert tenants.engines.omni.uploaded == {} and await listed(tenants, tenants.key_a) == []


async def test_a_voice_the_engine_lost_still_leaves_the_registry_clean(tenants: Tenants) -> None:
    _, voice = await clone(tenants, tenants.key_a, clip("wav", 4.0))
    tenants.engines.omni.uploaded.clear()
    assert (await delete(tenants, tenants.key_a, voice["id"]))[0] == 200
    assert await tenants.gateway.services.store.list_clones() == []
    assert (await clone(tenants, tenants.key_a, clip("wav", 4.0)))[0] == 200


async def test_clones_and_deletions_are_usage_events_at_no_cost(tenants: Tenants) -> None:
    _, voice = await clone(tenants, tenants.key_a, clip("wav", 4.0))
    await delete(tenants, tenants.key_a, voice["id"])
    await tenants.gateway.flush_usage()
    store = tenants.gateway.services.store
    assert await store.count_usage(tenants.group_a) == 2
    spend = await store.spend_since(date(2000, 1, 1))
    assert spend.get(tenants.group_a, 0) == 0


async def test_the_model_may_be_named_in_the_query_and_must_be_the_groups(
    tenants: Tenants,
) -> None:
    status, voice = await clone(tenants, tenants.key_a, clip("wav", 4.0), in_query=True)
    assert status == 200 and voice["model"] == "tts-pro"
    narrow = await tenants.gateway.group("narrow", models=["tts-fast"])
    key = await tenants.gateway.key(narrow)
    status, body = await clone(tenants, key, clip("wav", 4.0), in_query=True)
    assert status == 404 and body["error"]["code"] == "model_not_found"


async def test_cloning_and_deleting_without_a_model_are_400s(tenants: Tenants) -> None:
    form = aiohttp.FormData()
    form.add_field("label", "x")
    form.add_field("file", clip("wav", 4.0), filename="a.wav")
    async with aiohttp.ClientSession(headers=_auth(tenants.key_a)) as session:
        url = f"{tenants.gateway.v1}/audio/voices"
        async with session.post(url, data=form) as reply:
            created = reply.status, await reply.json()
        async with session.delete(f"{url}/g{tenants.group_a}__x") as reply:
            deleted = reply.status, await reply.json()
    for status, body in (created, deleted):
        assert status == 400 and "query param model is required" in body["error"]["message"]


async def post_raw(tenants: Tenants, path: str, content_type: str, body: bytes) -> Any:
    headers = {**_auth(tenants.key_a), "Content-Type": content_type}
    async with aiohttp.ClientSession() as session:
        url = f"{tenants.gateway.v1}{path}"
        async with session.post(url, data=body, headers=headers) as reply:
            return reply.status, await reply.json()


def form_body(parts: list[tuple[str, bytes]], boundary: str = "parley-test") -> bytes:
    """A ``multipart/form-data`` body; a part named ``file`` is sent as a file."""
    pieces = []
    for name, value in parts:
        filename = '; filename="clip.wav"' if name == "file" else ""
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"{filename}\r\n\r\n'
        pieces.append(head.encode() + value + b"\r\n")
    return b"".join(pieces) + f"--{boundary}--\r\n".encode()


FORM = "multipart/form-data; boundary=parley-test"
A_CLONE = [("model", b"tts-pro"), ("label", b"Anna"), ("file", clip("wav", 4.0))]


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data", b"no boundary"),
        ("multipart/form-data; boundary=x", b"never starts"),
        ("multipart/form-data; boundary=x", b"--x\r\nBad Header\r\n\r\nv\r\n--x--\r\n"),
    ],
)
async def test_a_malformed_form_is_a_400(tenants: Tenants, content_type: str, body: bytes) -> None:
    status, error = await post_raw(tenants, "/audio/voices?model=tts-pro", content_type, body)
    assert status == 400
    assert set(error["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/json", b"{}"),
        ("multipart/mixed; boundary=parley-test", form_body(A_CLONE)),
        ("application/x-www-form-urlencoded", b"model=tts-pro&label=Anna"),
    ],
    ids=["json", "multipart-mixed", "urlencoded"],
)
async def test_a_body_that_is_not_multipart_form_data_is_a_415(
    tenants: Tenants, content_type: str, body: bytes
) -> None:
    status, error = await post_raw(tenants, "/audio/voices", content_type, body)
    assert status == 415 and error["error"]["code"] == "unsupported_media_type"
    assert uploads(tenants) == 0


async def test_a_clone_form_of_too_many_parts_is_refused_before_the_engine(
    tenants: Tenants,
) -> None:
    assert (await post_raw(tenants, "/audio/voices", FORM, form_body(A_CLONE)))[0] == 200
    flooded = form_body([*A_CLONE[:2], *[("x", b"")] * 200, A_CLONE[2]])
    status, error = await post_raw(tenants, "/audio/voices", FORM, flooded)
    assert status == 400 and "too many" in error["error"]["message"]
    assert uploads(tenants) == 1


@pytest.mark.parametrize(
    "parts",
    [
        [*A_CLONE, *[("x", b"")] * 100],  # 103 parts
        [*A_CLONE, ("transcript", b"t" * (64 * 1024 + 1))],
        [*A_CLONE, ("file", b"RIFF")],  # two files
        [("model", b"tts-pro"), ("label", b"\xff\xfe")],  # not UTF-8
    ],
)
async def test_clones_and_transcriptions_read_their_forms_alike(
    tenants: Tenants, parts: list[tuple[str, bytes]]
) -> None:
    """One reader for every upload: the same caps, the same answers, before any model
    is resolved (the transcription endpoint needs no transcription model to say so)."""
    body = form_body(parts)
    cloned = await post_raw(tenants, "/audio/voices", FORM, body)
    transcribed = await post_raw(tenants, "/audio/transcriptions", FORM, body)
    assert cloned[0] == 400 and cloned == transcribed
    assert uploads(tenants) == 0
