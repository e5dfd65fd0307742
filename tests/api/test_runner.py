"""The runner's promises, end to end: every admitted call is metered exactly once with a
truthful status, whatever ends it (a bug in an adapter, a caller who leaves, shutdown),
and a stream that fails after its reply started ends cleanly instead of getting a second
HTTP response."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import openai
import orjson
import pytest
from aiohttp import web

from parley.app import at_the_edge, create_app
from parley.dialects.call import OPENAI_CHAT, ChatCall, Dialect, Speaks
from parley.dialects.canonical import Reply
from parley.dialects.chunk_reader import ChunkReader
from parley.dialects.translator import ChunkTranslator, Translator
from parley.domain.models import Resolved
from parley.domain.usage import Allowance, Usage, UsageRecord
from parley.domain.wire import JSON
from parley.errors import ParleyError
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.context import services
from parley.pipeline.job import NO_HEADERS, Operation
from parley.pipeline.route import Route
from parley.providers.base import CHAT, Batches, Target
from parley.providers.openai import OpenAIAdapter
from parley.runtime.in_flight import SHUTDOWN_STATUS
from parley.settings import Settings
from tests.api.harness import Gateway, default_config, records
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

MESSAGES: Any = [{"role": "user", "content": "hello there friend"}]
T = TypeVar("T")


class BuggyAdapter:
    """Parley's own adapter with a bug in its translation (not an upstream stand-in: the
    upstream is the real fake engine, reached through the real adapter)."""

    def __init__(self, real: OpenAIAdapter, *, fail_after_batches: int = 0) -> None:
        self._real = real
        self._fail_after = fail_after_batches

    dialects = frozenset({OPENAI_CHAT})

    def speaks(self, target: Target) -> Speaks:
        return self._real.speaks(target)

    async def relay(self, target: Target, dialect: Dialect, body: JSON, beta: str | None) -> JSON:
        reply = await self._real.relay(target, dialect, body, beta)
        return {"choices": reply["no such field"]}

    def relay_stream(
        self,
        target: Target,
        dialect: Dialect,
        body: JSON,
        beta: str | None,
        translator: Translator[T],
    ) -> AbstractAsyncContextManager[AsyncIterator[Sequence[T]]]:
        return self._stream(target, body, translator)

    def generate(self, target: Target, call: ChatCall) -> Awaitable[Reply]:
        return self._real.generate(target, call)

    def generate_stream(
        self, target: Target, call: ChatCall, translator: ChunkTranslator[T]
    ) -> AbstractAsyncContextManager[AsyncIterator[Sequence[T]]]:
        return self._real.generate_stream(target, call, translator)

    @asynccontextmanager
    async def _stream(
        self, target: Target, body: JSON, translator: Translator[T]
    ) -> AsyncIterator[AsyncIterator[Sequence[T]]]:
        async with self._real.relay_stream(target, OPENAI_CHAT, body, None, translator) as batches:
            yield self._translate(batches)

    async def _translate(self, batches: AsyncIterator[Sequence[T]]) -> AsyncIterator[Sequence[T]]:
        relayed = 0
        async for batch in batches:
            if relayed == self._fail_after:
                raise KeyError("a field the translation expected")
            relayed += 1
            yield batch


def install_bug(gateway: Gateway, *, fail_after_batches: int = 0) -> None:
    real = OpenAIAdapter(gateway.services.http)
    buggy = BuggyAdapter(real, fail_after_batches=fail_after_batches)
    gateway.services.providers.register("openai", buggy, CHAT)


async def read_events(response: aiohttp.ClientResponse) -> list[bytes]:
    return [line.strip() async for line in response.content if line.startswith(b"data: ")]


async def only_record(gateway: Gateway) -> UsageRecord:
    async with asyncio.timeout(5):
        while not await records(gateway):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    # Let a second record, if the call were metered twice, reach the store too (a pause
    # that can only hide a failure on a slow machine, never make a correct run fail).
    await asyncio.sleep(0.1)
    (record,) = await records(gateway)
    return record


async def test_a_bug_in_an_adapter_is_a_500_metered_once(gateway: Gateway, key: str) -> None:
    install_bug(gateway)
    with pytest.raises(openai.InternalServerError) as failed:
        await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    assert "no such field" not in failed.value.message
    record = await only_record(gateway)
    assert (record.status, record.cost_nanos) == (500, 0)


async def test_a_bug_before_a_stream_starts_is_a_500_envelope_metered_once(
    gateway: Gateway, key: str
) -> None:
    install_bug(gateway, fail_after_batches=0)
    body = {"model": "chat-large", "messages": MESSAGES, "stream": True}
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.post(f"{gateway.v1}/chat/completions", json=body) as response,
    ):
        assert response.status == 500
        envelope = await response.json()
    assert envelope["error"]["type"] == "server_error"
    record = await only_record(gateway)
    assert (record.status, record.cost_nanos) == (500, 0)


async def test_a_bug_after_a_stream_started_ends_it_with_an_error_event_and_done(
    gateway: Gateway, key: str, engine: FakeEngine, caplog: pytest.LogCaptureFixture
) -> None:
    engine.behaviour = Behaviour(delay=0.01, words=20)
    install_bug(gateway, fail_after_batches=3)
    body = {"model": "chat-large", "messages": MESSAGES, "stream": True}
    with caplog.at_level(logging.ERROR, logger="parley.runner"):
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
            session.post(f"{gateway.v1}/chat/completions", json=body) as response,
        ):
            assert response.status == 200
            raw = await response.read()
    assert b"HTTP/1.1" not in raw  # no second response written into the stream
    events = [line for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert events[-1] == b"data: [DONE]"
    error = orjson.loads(events[-2][6:])["error"]
    assert error["type"] == "server_error"
    assert all(b'"error"' not in event for event in events[:-2])
    assert "a stream failed after its reply started" in caplog.text
    record = await only_record(gateway)
    assert record.status == 500
    assert record.cost_nanos > 0  # what was delivered is billed
    assert record.completion_tokens >= 1


async def test_a_caller_who_leaves_a_plain_call_is_metered_once_as_499(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(hang=5.0)
    body = {"model": "chat-large", "messages": MESSAGES}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await session.post(f"{gateway.v1}/chat/completions", json=body)
    record = await only_record(gateway)
    assert (record.status, record.cost_nanos) == (499, 0)


async def test_shutdown_ends_open_streams_with_an_error_event_and_bills_the_delivered(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(delay=0.05, words=200)
    body = {"model": "chat-large", "messages": MESSAGES, "stream": True}
    streams = gateway.services.in_flight
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.post(f"{gateway.v1}/chat/completions", json=body) as response,
    ):
        received = []
        async for line in response.content:
            if line.startswith(b"data: "):
                received.append(line.strip())
            if len(received) == 3:
                break
        assert len(streams) == 1
        assert await streams.end_all() == 1
        rest = await read_events(response)
    assert rest[-1] == b"data: [DONE]"
    assert orjson.loads(rest[-2][6:])["error"]["code"] == "service_unavailable"
    assert len(streams) == 0
    record = await only_record(gateway)
    assert record.status == SHUTDOWN_STATUS
    assert record.cost_nanos > 0 and record.estimated
    assert 1 <= record.completion_tokens < 200


async def test_shutdown_ends_a_plain_call_still_waiting_with_a_503_not_billed(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(hang=5.0)
    body = {"model": "chat-large", "messages": MESSAGES}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:
        call = asyncio.create_task(session.post(f"{gateway.v1}/chat/completions", json=body))
        async with asyncio.timeout(5):
            while not engine.requests:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert await gateway.services.in_flight.end_all() == 1
        response = await call
        assert response.status == 503
        assert (await response.json())["error"]["code"] == "service_unavailable"
        response.release()
    assert len(gateway.services.in_flight) == 0
    record = await only_record(gateway)
    assert (record.status, record.cost_nanos) == (SHUTDOWN_STATUS, 0)


async def test_shutdown_before_a_stream_started_is_a_503_and_not_billed(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(hang=5.0)
    body = {"model": "chat-large", "messages": MESSAGES, "stream": True}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:
        call = asyncio.create_task(session.post(f"{gateway.v1}/chat/completions", json=body))
        async with asyncio.timeout(5):
            while not engine.requests:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        assert await gateway.services.in_flight.end_all() == 1
        response = await call
        assert response.status == 503
        assert (await response.json())["error"]["code"] == "service_unavailable"
        response.release()
    record = await only_record(gateway)
    assert (record.status, record.cost_nanos) == (SHUTDOWN_STATUS, 0)


class RawTextJob:
    """Another operation through the same runner, as a plain-bytes stream (the shape of
    speech relayed as raw audio): the reply's text, with no framing to tell a failure."""

    content_type = "text/plain"
    reply_headers = NO_HEADERS
    whole = None
    operation = Operation("raw text", "/v1/test/raw-text", frozenset({"chat"}))

    def __init__(self, providers: Any, body: JSON) -> None:
        self._providers = providers
        self._body = body
        self._characters = 0

    @property
    def model(self) -> str:
        return str(self._body["model"])

    def accept(self, model: Resolved) -> None:
        return None

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return 0

    def allowance(self, model: Resolved) -> Allowance:
        return Allowance(characters=1_000_000)  # far above the fake engine's short echoes

    def open(self, route: Route) -> AbstractAsyncContextManager[Batches]:
        adapter = self._providers.serving(CHAT, route.provider_type)
        return adapter.relay_stream(
            route.target, OPENAI_CHAT, self._body, None, ChunkReader(1 << 20)
        )

    def render(self, batch: Sequence[JSON]) -> bytes:
        text = "".join(
            choice["delta"].get("content") or "" for chunk in batch for choice in chunk["choices"]
        )
        self._characters += len(text)
        return text.encode()

    def end(self) -> bytes:
        return b""

    def failure(self, error: ParleyError) -> bytes | None:
        return None

    def delivered(self) -> Usage | None:
        return Usage(characters=self._characters) if self._characters else None


@pytest.fixture
async def raw_gateway(engine: FakeEngine, tmp_path: Path) -> AsyncIterator[Gateway]:
    """A gateway with one more endpoint, served by ``RawTextJob``."""

    async def raw_text(request: web.Request) -> web.StreamResponse:
        job = RawTextJob(services(request).providers, await request.json())
        return await runner.stream(request, job)

    gateway = Gateway(Settings.model_validate(default_config(engine.base_url, tmp_path)))
    app = create_app(gateway.settings)
    app.router.add_post("/v1/test/raw-text", at_the_edge(raw_text))
    gateway.runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1)
    await gateway.runner.setup()
    await web.TCPSite(gateway.runner, "127.0.0.1", 0).start()
    gateway.base_url = f"http://127.0.0.1:{gateway.runner.addresses[0][1]}"
    yield gateway
    await gateway.stop()


async def test_another_operation_streams_raw_bytes_through_the_same_runner(
    raw_gateway: Gateway,
) -> None:
    key = await raw_gateway.key(await raw_gateway.group("team"))
    body = {"model": "chat-large", "messages": MESSAGES}
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.post(f"{raw_gateway.v1}/test/raw-text", json=body) as response,
    ):
        assert response.headers["Content-Type"].startswith("text/plain")
        assert response.headers["x-request-id"].startswith("req_")
        text = await response.text()
    assert text == "echo: hello there friend"
    record = await only_record(raw_gateway)
    assert (record.endpoint, record.status, record.characters) == ("/v1/test/raw-text", 200, 24)


async def test_a_raw_stream_that_fails_midway_is_cut_so_the_caller_sees_it_truncated(
    raw_gateway: Gateway, engine: FakeEngine
) -> None:
    key = await raw_gateway.key(await raw_gateway.group("team"))
    engine.behaviour = Behaviour(error_after=3, words=20)
    body = {"model": "chat-large", "messages": MESSAGES}
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.post(f"{raw_gateway.v1}/test/raw-text", json=body) as response,
    ):
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    record = await only_record(raw_gateway)
    assert record.status == 502
    assert record.characters > 0
