"""Large chat and Messages bodies are read, and translated, in a body process.

``server.large_body_bytes`` is set low here, so a body of a few hundred same-role
messages is large. In the serving process every decoder a chat or Messages body goes
through is made to fail (the JSON decoder, the request parsers, the dialects' request
readers): a large body still gets its answer, because a body process (spawned, untouched
by the test) read it and wrote it for its upstream, whatever that upstream's dialect. The
answers are a small body's: each upstream gets the same merged turn, and a refusal has the
same status, envelope and ``param``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from parley.api import chat, messages
from parley.dialects import anthropic_messages, openai_chat
from tests.api.harness import CHANNEL_KEY, Config, Gateway, call, starting
from tests.api.upstreams_harness import KEYS, Upstreams, every_upstream_config
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.bedrock import FakeBedrock
from tests.upstreams.gemini import FakeGemini
from tests.upstreams.openai_compatible import FakeEngine

LARGE = 4096
ITEMS = 300
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    async with (
        FakeEngine(api_key=CHANNEL_KEY) as engine,
        FakeAnthropic(api_key=CHANNEL_KEY) as anthropic,
        FakeGemini(api_key=CHANNEL_KEY) as gemini,
        FakeBedrock(credentials=KEYS, region="us-east-1") as bedrock,
    ):

        def config() -> Config:
            written = every_upstream_config(engine, anthropic, gemini, bedrock, tmp_path)
            written["server"] = {"large_body_bytes": LARGE}
            for model in written["models"]:
                model["context_window"] = 1_000_000
            return written

        async with starting(config) as start:
            yield Upstreams(await start(), engine, anthropic, gemini, bedrock)


@pytest.fixture
async def key(upstreams: Upstreams) -> str:
    gateway = upstreams.gateway
    return await gateway.key(await gateway.group("team"))


def _refuse(*_: Any, **__: Any) -> Any:
    raise AssertionError("a large body was read on the serving event loop")


@pytest.fixture
def no_decoding_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The serving process can neither decode a chat or Messages body nor translate one
    (a body process still can)."""
    for module, name in (
        (chat, "decode_json"),
        (chat, "parse_chat"),
        (messages, "decode_json"),
        (messages, "parse_messages"),
        (messages, "parse_count"),
        (openai_chat, "decode_request"),
        (anthropic_messages, "decode_request"),
    ):
        monkeypatch.setattr(module, name, _refuse)


@pytest.fixture
def runs(upstreams: Upstreams, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Each body-process run, as (group, function), in order."""
    bodies = upstreams.gateway.services.bodies
    real = bodies.placed
    seen: list[tuple[int, str]] = []

    async def recorded(
        group: int, where: int | None, function: Callable[..., Any], *args: Any
    ) -> Any:
        seen.append((group, function.__name__))
        return await real(group, where, function, *args)

    monkeypatch.setattr(bodies, "placed", recorded)
    return seen


def lines(count: int = ITEMS) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"line {n}"} for n in range(count)]


def texts(count: int = ITEMS) -> list[str]:
    return [f"line {n}" for n in range(count)]


def chat_body(model: str, **more: Any) -> dict[str, Any]:
    return {"model": model, "messages": lines(), "max_tokens": 16, **more}


async def post(gateway: Gateway, key: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return await call(gateway, "POST", path, key, json=body)


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_chat_body_goes_to_an_openai_channel_as_it_came(
    upstreams: Upstreams, key: str, runs: list[tuple[int, str]]
) -> None:
    status, answer = await post(upstreams.gateway, key, CHAT, chat_body("openai"))
    assert status == 200, answer
    sent = upstreams.engine.requests[-1].body
    assert (sent["model"], sent["messages"]) == ("upstream-chat", lines())
    assert [name for _, name in runs] == ["read_chat_apart"]  # nothing to translate


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_chat_body_is_translated_apart_for_anthropic(
    upstreams: Upstreams, key: str, runs: list[tuple[int, str]]
) -> None:
    status, answer = await post(upstreams.gateway, key, CHAT, chat_body("claude"))
    assert status == 200, answer
    [turn] = upstreams.anthropic.requests[-1].body["messages"]
    assert turn["role"] == "user"
    assert [block["text"] for block in turn["content"]] == texts()
    group = runs[0][0]
    assert runs == [(group, "read_chat_apart"), (group, "translate_kept")]  # read once


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_chat_stream_is_translated_apart_for_gemini(
    upstreams: Upstreams, key: str
) -> None:
    status, text = await post(upstreams.gateway, key, CHAT, chat_body("gemini", stream=True))
    assert status == 200, text
    assert "data: [DONE]" in text
    [turn] = upstreams.gemini.requests[-1].body["contents"]
    assert turn["role"] == "user"
    assert [part["text"] for part in turn["parts"]] == texts()


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_chat_body_is_translated_apart_for_bedrock(
    upstreams: Upstreams, key: str
) -> None:
    status, answer = await post(upstreams.gateway, key, CHAT, chat_body("bedrock"))
    assert status == 200, answer
    [turn] = upstreams.bedrock.requests[-1].body["messages"]
    assert [block["text"] for block in turn["content"]] == texts()
    assert answer["choices"][0]["message"]["content"].startswith("echo")


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_messages_body_goes_to_anthropic_as_it_came(
    upstreams: Upstreams, key: str
) -> None:
    body = chat_body("claude", metadata={"user_id": "u-1"})
    status, answer = await post(upstreams.gateway, key, MESSAGES, body)
    assert status == 200, answer
    assert answer["type"] == "message"
    sent = upstreams.anthropic.requests[-1].body
    assert (sent["model"], sent["messages"], sent["metadata"]) == (
        "claude-up",
        lines(),
        {"user_id": "u-1"},
    )


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_messages_body_is_translated_apart_for_openai(
    upstreams: Upstreams, key: str, runs: list[tuple[int, str]]
) -> None:
    status, answer = await post(upstreams.gateway, key, MESSAGES, chat_body("openai"))
    assert status == 200, answer
    assert answer["type"] == "message"
    sent = upstreams.engine.requests[-1].body
    assert (sent["model"], sent["messages"], sent["max_tokens"]) == ("upstream-chat", lines(), 16)
    assert [name for _, name in runs] == ["read_messages_apart", "translate_kept"]


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_messages_stream_is_translated_apart_for_gemini(
    upstreams: Upstreams, key: str
) -> None:
    body = chat_body("gemini", stream=True)
    status, text = await post(upstreams.gateway, key, MESSAGES, body)
    assert status == 200, text
    assert "event: message_stop" in text
    turns = upstreams.gemini.requests[-1].body["contents"]  # one a message (canonical call)
    assert [part["text"] for turn in turns for part in turn["parts"]] == texts()


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_count_tokens_body_is_read_apart(
    upstreams: Upstreams, key: str, runs: list[tuple[int, str]]
) -> None:
    body = {"model": "claude", "messages": lines()}
    status, answer = await post(upstreams.gateway, key, f"{MESSAGES}/count_tokens", body)
    assert status == 200, answer
    assert upstreams.anthropic.requests[-1].body["messages"] == lines()
    status, estimated = await post(
        upstreams.gateway, key, f"{MESSAGES}/count_tokens", {**body, "model": "openai"}
    )
    assert status == 200, estimated
    assert estimated["input_tokens"] > ITEMS
    assert [name for _, name in runs] == ["read_messages_apart"] * 2


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_chat_body_is_refused_as_a_small_one(upstreams: Upstreams, key: str) -> None:
    gateway = upstreams.gateway
    bad = [*lines(), {"role": "robot", "content": "beep"}]
    status, answer = await post(gateway, key, CHAT, {"model": "openai", "messages": bad})
    assert status == 400
    assert answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["param"] == f"messages[{ITEMS}].role"
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    pictured = [*lines(), {"role": "user", "content": [image]}]
    status, answer = await post(gateway, key, CHAT, {"model": "openai", "messages": pictured})
    assert status == 400
    assert answer["error"]["code"] == "image_not_supported"
    assert answer["error"]["param"] == f"messages[{ITEMS}].content[0]"
    status, answer = await post(gateway, key, CHAT, chat_body("claude", temperature=1.5))
    assert status == 400  # Messages takes a temperature up to 1: refused in translation
    assert answer["error"]["param"] == "temperature"
    assert not upstreams.anthropic.requests


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_messages_body_is_refused_in_anthropics_shape(
    upstreams: Upstreams, key: str
) -> None:
    gateway = upstreams.gateway
    status, answer = await post(gateway, key, MESSAGES, {"model": "claude", "messages": lines()})
    assert status == 400
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in answer["error"]["message"]
    body = chat_body("openai", system=[{"type": "image", "source": {}}])
    status, answer = await post(gateway, key, MESSAGES, body)
    assert (status, answer["type"]) == (400, "error")  # refused translating it, apart
    assert not upstreams.engine.requests


async def test_another_groups_call_is_not_held_behind_a_large_body(
    upstreams: Upstreams, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one group's large body is in the body pool (held there), another group's
    call is answered: it neither waits for the pool nor for the event loop."""
    gateway = upstreams.gateway
    other = await gateway.key(await gateway.group("other"))
    bodies = gateway.services.bodies
    real = bodies.placed
    inside, release = asyncio.Event(), asyncio.Event()

    async def held(group: int, where: int | None, function: Callable[..., Any], *args: Any) -> Any:
        inside.set()
        await release.wait()
        return await real(group, where, function, *args)

    monkeypatch.setattr(bodies, "placed", held)
    large = asyncio.create_task(post(gateway, key, CHAT, chat_body("claude")))
    entered = asyncio.create_task(inside.wait())
    done, _ = await asyncio.wait({entered, large}, return_when=asyncio.FIRST_COMPLETED)
    assert entered in done, "the large body was answered without the body pool"
    small = {"model": "openai", "messages": lines(2), "max_tokens": 16}
    status, answer = await post(gateway, other, CHAT, small)
    assert status == 200, answer
    assert not large.done()
    release.set()
    status, answer = await large
    assert status == 200, answer
