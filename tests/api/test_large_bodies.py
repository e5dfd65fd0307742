"""A large Responses body is read in a body process, never on the serving event loop.

``server.large_body_bytes`` is set low here, so a body of a few hundred same-role items
is large. In the serving process the Responses decoder is made to fail: a large body
still gets its answer, because a body process (spawned, untouched by the test) read it;
a small one, read in place, would not. The answers are the same as a small body's:
the upstream gets the same merged turn, the stored response lists the same items, a
refusal names the same field, and a body continuing a stored response (which reads the
database) is read in the serving process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from parley.dialects import openai_chat, openai_responses
from tests.api.harness import CHANNEL_KEY, Gateway, starting
from tests.api.responses_harness import Upstreams, responses_config
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.openai_compatible import FakeEngine

LARGE = 4096
ITEMS = 300


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    def config() -> dict[str, Any]:
        written = responses_config(engine.base_url, anthropic.base_url, tmp_path)
        written["server"] = {"large_body_bytes": LARGE}
        return written

    async with (
        FakeEngine(api_key=CHANNEL_KEY) as engine,
        FakeAnthropic(api_key=CHANNEL_KEY) as anthropic,
        starting(config) as start,
    ):
        yield Upstreams(engine, anthropic, await start())


@pytest.fixture
async def key(upstreams: Upstreams) -> str:
    gateway = upstreams.gateway
    return await gateway.key(await gateway.group("team"))


@pytest.fixture
def no_decoding_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The serving process can neither read a Responses body nor translate its chat body
    for another dialect (a body process still can)."""

    def refuse(*_: Any) -> Any:
        raise AssertionError("a large body was read on the serving event loop")

    monkeypatch.setattr(openai_responses, "decode_request", refuse)
    monkeypatch.setattr(openai_chat, "decode_request", refuse)


def lines(count: int = ITEMS) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"line {n}"} for n in range(count)]


async def post(gateway: Gateway, key: str, body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{gateway.v1}/responses", json=body, headers=headers) as reply,
    ):
        return reply.status, await reply.json()


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_body_is_answered_and_sent_on_as_one_turn(
    upstreams: Upstreams, key: str
) -> None:
    status, answer = await post(upstreams.gateway, key, {"model": "gpt-like", "input": lines()})
    assert status == 200, answer
    assert answer["status"] == "completed"
    sent = upstreams.engine.requests[-1].body
    assert sent["model"] == "upstream-chat"
    [turn] = sent["messages"]
    assert turn["role"] == "user"
    assert [part["text"] for part in turn["content"]] == [f"line {n}" for n in range(ITEMS)]


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_body_streams_and_is_stored_with_its_items(
    upstreams: Upstreams, key: str
) -> None:
    client = upstreams.gateway.client(key)
    async with client.responses.stream(model="gpt-like", input=lines()) as events:
        final = await events.get_final_response()
    stored = await client.responses.retrieve(final.id)
    assert stored.output_text == final.output_text
    items = await client.responses.input_items.list(final.id, order="asc", limit=3)
    assert [item.model_dump()["content"][0]["text"] for item in items.data] == [
        "line 0",
        "line 1",
        "line 2",
    ]
    assert all(item.id.startswith("msg_") for item in items.data)


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_body_to_a_translating_channel_is_one_turn_there(
    upstreams: Upstreams, key: str
) -> None:
    status, answer = await post(upstreams.gateway, key, {"model": "claude-like", "input": lines()})
    assert status == 200, answer
    [turn] = upstreams.anthropic.requests[-1].body["messages"]
    assert [block["text"] for block in turn["content"]] == [f"line {n}" for n in range(ITEMS)]


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_body_streams_from_a_translating_channel(
    upstreams: Upstreams, key: str
) -> None:
    client = upstreams.gateway.client(key)
    async with client.responses.stream(model="claude-like", input=lines(), store=False) as events:
        final = await events.get_final_response()
    assert final.status == "completed"
    [turn] = upstreams.anthropic.requests[-1].body["messages"]
    assert [block["text"] for block in turn["content"]] == [f"line {n}" for n in range(ITEMS)]
    assert upstreams.anthropic.requests[-1].body["stream"] is True


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_body_goes_to_a_native_channel_as_it_came(
    upstreams: Upstreams, key: str
) -> None:
    items = [*lines(), {"type": "web_search_call", "id": "ws_1", "status": "completed"}]
    body = {"model": "gpt-native", "input": items, "tools": [{"type": "web_search"}]}
    status, answer = await post(upstreams.gateway, key, body)
    assert status == 200, answer
    sent = upstreams.engine.last_request
    assert sent.path == "/v1/responses"
    assert sent.body["input"] == items
    assert sent.body["model"] == "upstream-native"


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_body_is_refused_as_a_small_one_naming_the_field(
    upstreams: Upstreams, key: str
) -> None:
    items = [*lines(), {"type": "web_search_call", "id": "ws_1"}]
    status, answer = await post(upstreams.gateway, key, {"model": "gpt-like", "input": items})
    assert status == 400
    assert answer["error"]["param"] == f"input[{ITEMS}].type"
    status, answer = await post(
        upstreams.gateway, key, {"model": "gpt-like", "input": lines(), "store": "yes"}
    )
    assert (status, answer["error"]["param"]) == (400, "store")


async def test_a_large_body_that_continues_a_stored_response_is_read_here(
    upstreams: Upstreams, key: str
) -> None:
    client = upstreams.gateway.client(key)
    first = await client.responses.create(model="gpt-like", input="hello")
    follow = await client.responses.create(
        model="gpt-like",
        input=lines(),
        previous_response_id=first.id,
    )
    assert follow.status == "completed"
    sent = upstreams.engine.requests[-1].body["messages"]
    assert [message["role"] for message in sent] == ["user", "assistant", "user"]


async def test_a_small_body_is_read_in_place(
    upstreams: Upstreams, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_process(*_: Any) -> Any:
        raise AssertionError("a small body went to a body process")

    monkeypatch.setattr(upstreams.gateway.services.bodies, "run", no_process)
    client: openai.AsyncOpenAI = upstreams.gateway.client(key)
    small = await client.responses.create(model="gpt-like", input=lines(20))
    assert small.status == "completed"
