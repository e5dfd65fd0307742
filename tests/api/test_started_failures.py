"""A reply that already started ends in its caller's dialect, whoever tells the failure:
the runner (with the job's own ``failure``) or, for a failure that escaped every job, the
gateway's boundary (``pipeline/started.py``). On ``/v1/messages`` that is Anthropic's
``error`` event, never OpenAI's ``data: {"error": ...}`` and ``[DONE]``."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from parley.api.messages import MessagesStream
from tests.api.harness import Gateway, records
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

HELLO = [{"role": "user", "content": "hello there friend"}]


def events(body: bytes) -> list[tuple[str, Any]]:
    """(name, data) of each Anthropic event; a ``data:`` line without a name is ("", ...)."""
    found = []
    for block in body.split(b"\n\n"):
        if not block.strip():
            continue
        name, data = "", b""
        for line in block.split(b"\n"):
            if line.startswith(b"event: "):
                name = line[7:].decode()
            elif line.startswith(b"data: "):
                data = line[6:]
        found.append((name, data if data == b"[DONE]" else orjson.loads(data)))
    return found


async def stream_message(gateway: Gateway, key: str) -> bytes:
    body = {"model": "chat-large", "max_tokens": 50, "messages": HELLO, "stream": True}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.base_url}/v1/messages",
            json=body,
            headers={"x-api-key": key, "anthropic-version": "2023-06-01"},
        ) as response,
    ):
        assert response.status == 200
        return await response.read()


async def test_a_failure_the_runner_tells_is_an_anthropic_error_event(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(error_after=2)
    found = events(await stream_message(gateway, key))
    assert found[0][0] == "message_start"
    name, data = found[-1]
    assert name == "error" and data["type"] == "error"
    assert data["error"]["type"] == "api_error"
    assert all(name for name, _ in found), "every event is Anthropic's, named"


async def test_a_failure_that_escaped_the_job_is_an_anthropic_error_event_too(
    gateway: Gateway, key: str, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug in the job's metering, after the runner told the upstream's failure: it
    # escapes the runner, and the gateway's boundary ends the started reply.
    def broken(self: MessagesStream) -> None:
        raise RuntimeError("a bug in the job")

    monkeypatch.setattr(MessagesStream, "delivered", broken)
    engine.behaviour = Behaviour(error_after=2)
    found = events(await stream_message(gateway, key))
    assert [name for name, _ in found[-2:]] == ["error", "error"]
    assert found[-1][1]["error"] == {
        "type": "api_error",
        "message": "The server had an error while processing your request.",
    }
    assert all(name for name, _ in found), "no OpenAI event, no [DONE]"
    (record,) = await records(gateway)
    assert record.status == 502  # the upstream's failure, recorded first
