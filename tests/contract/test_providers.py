"""The contract every ``Chat`` + ``Completion`` adapter keeps, against a fake engine over HTTP.

Parametrized over the channel types whose adapters speak OpenAI's wire format (the fake
engine's); each distinct adapter needs only one of its type names here.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any, Protocol, TypeVar, cast

import pytest

from parley.dialects import openai_chat, openai_chat_reply
from parley.dialects.call import OPENAI_CHAT, ChatCall, passes_through
from parley.dialects.chunk_reader import ChunkReader
from parley.dialects.translator import ChunkTranslator
from parley.domain.wire import JSON
from parley.errors import UpstreamError, UpstreamRefused, UpstreamTimeout, UpstreamUnreachable
from parley.http import HttpClient
from parley.providers.base import (
    CHAT,
    COMPLETION,
    Batches,
    Chat,
    Completion,
    Target,
)
from parley.providers.registry import (
    OPENAI_COMPATIBLE_TYPES,
    ProviderRegistry,
    UnknownProviderType,
)
from tests.upstreams import CONNECT_SECONDS
from tests.upstreams.openai_compatible import FakeEngine

ADAPTER_TYPES = ["openai"]
CHANNEL_KEY = "sk-channel-secret"
HELLO = {"model": "public-name", "messages": [{"role": "user", "content": "hello there"}]}
PROMPT = {"model": "public-name", "prompt": "once upon"}
T = TypeVar("T")
LIMIT = 1 << 20
"""The reader's bound on one event."""


class Adapter(Chat, Completion, Protocol):
    pass


def call_of(body: JSON) -> ChatCall:
    return ChatCall(OPENAI_CHAT, body, openai_chat.decode_request)


async def chat(adapter: Chat, to: Target, body: JSON) -> JSON:
    """A whole chat reply, as a chat job asks for it (passed through, or translated)."""
    if passes_through(OPENAI_CHAT, adapter.speaks(to)):
        return await adapter.relay(to, OPENAI_CHAT, body, None)
    return openai_chat_reply.encode_reply(await adapter.generate(to, call_of(body)))


def chat_stream(
    adapter: Chat, to: Target, body: JSON, translator: ChunkTranslator[T]
) -> AbstractAsyncContextManager[AsyncIterator[Sequence[T]]]:
    """A chat stream, as a chat job opens it (passed through, or translated)."""
    if passes_through(OPENAI_CHAT, adapter.speaks(to)):
        return adapter.relay_stream(to, OPENAI_CHAT, body, None, translator)
    return adapter.generate_stream(to, call_of(body), translator)


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    async with FakeEngine() as engine:
        yield engine


@pytest.fixture
async def session() -> AsyncIterator[HttpClient]:
    client = HttpClient()
    yield client
    await client.close()


@pytest.fixture(params=ADAPTER_TYPES)
def adapter(request: pytest.FixtureRequest, session: HttpClient) -> Adapter:
    registry = ProviderRegistry.default(session)
    chat, completion = (
        registry.serving(CHAT, request.param),
        registry.serving(COMPLETION, request.param),
    )
    assert id(chat) == id(completion), "this suite drives one adapter serving both"
    return cast(Adapter, chat)


def target(
    engine: FakeEngine,
    model: str = "fake-model",
    *,
    api_key: str | None = CHANNEL_KEY,
    read_timeout: float = 5.0,
) -> Target:
    return Target("main", engine.base_url, api_key, model, CONNECT_SECONDS, read_timeout)


async def collect(stream: AbstractAsyncContextManager[Batches]) -> list[JSON]:
    async with stream as batches:
        return [chunk async for batch in batches for chunk in always_some(batch)]


def always_some(batch: Sequence[JSON]) -> Sequence[JSON]:
    assert batch, "a stream never yields an empty batch"
    return batch


def chat_text(chunks: list[JSON]) -> str:
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])


# Whole replies


async def test_chat_returns_the_engines_reply(adapter: Adapter, engine: FakeEngine) -> None:
    reply = await chat(adapter, target(engine), HELLO)
    assert reply["object"] == "chat.completion"
    assert reply["model"] == "fake-model"
    assert reply["choices"][0]["message"]["content"] == "echo: hello there"
    assert reply["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


async def test_completion_returns_the_engines_reply(adapter: Adapter, engine: FakeEngine) -> None:
    reply = await adapter.completion(target(engine), PROMPT)
    assert engine.last_request.path == "/v1/completions"
    assert reply["object"] == "text_completion"
    assert reply["choices"][0]["text"] == "echo: once upon"


async def test_the_upstream_model_name_replaces_the_callers(
    adapter: Adapter, engine: FakeEngine
) -> None:
    await chat(adapter, target(engine, "upstream-name"), HELLO)
    assert engine.last_request.body["model"] == "upstream-name"
    assert HELLO["model"] == "public-name", "the caller's body is not modified"


async def test_every_other_field_passes_through_untouched(
    adapter: Adapter, engine: FakeEngine
) -> None:
    body = {
        **HELLO,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "tool_choice": "auto",
        "response_format": {"type": "json_object"},
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["\n\n"],
        "seed": 42,
        "user": "u-1",
        "n": 1,
        "logprobs": True,
        "top_logprobs": 2,
        "vendor_extension": {"nested": [1, 2]},
    }
    await chat(adapter, target(engine), body)
    assert engine.last_request.body == {**body, "model": "fake-model"}


@pytest.mark.parametrize("api_key", [CHANNEL_KEY, None])
async def test_authorization_is_sent_only_with_a_key(
    adapter: Adapter, engine: FakeEngine, api_key: str | None
) -> None:
    await chat(adapter, target(engine, api_key=api_key), HELLO)
    expected = f"Bearer {api_key}" if api_key else None
    assert engine.last_request.authorization == expected
    assert engine.last_request.headers["Content-Type"] == "application/json"


async def test_a_whole_reply_is_never_asked_to_stream(adapter: Adapter, engine: FakeEngine) -> None:
    body = {**HELLO, "stream": True, "stream_options": {"include_usage": True}}
    reply = await chat(adapter, target(engine), body)
    assert reply["object"] == "chat.completion"
    assert engine.last_request.body["stream"] is False
    assert "stream_options" not in engine.last_request.body


async def test_a_reply_that_is_not_an_object_is_an_upstream_error(
    adapter: Adapter, engine: FakeEngine
) -> None:
    with pytest.raises(UpstreamError) as caught:
        await chat(adapter, target(engine, "junk"), HELLO)
    assert caught.value.status == 502


# Streams


async def test_a_stream_yields_the_chunks_in_order(adapter: Adapter, engine: FakeEngine) -> None:
    chunks = await collect(chat_stream(adapter, target(engine), HELLO, ChunkReader(LIMIT)))
    assert chat_text(chunks) == "echo: hello there"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)


async def test_a_stream_asks_for_usage_and_keeps_the_callers_options(
    adapter: Adapter, engine: FakeEngine
) -> None:
    body = {**HELLO, "stream_options": {"include_usage": False, "continuous_usage_stats": True}}
    chunks = await collect(chat_stream(adapter, target(engine), body, ChunkReader(LIMIT)))
    sent = engine.last_request.body
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert sent["model"] == "fake-model"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


async def test_a_completion_stream(adapter: Adapter, engine: FakeEngine) -> None:
    chunks = await collect(
        adapter.completion_stream(target(engine), {**PROMPT, "max_tokens": 2}, ChunkReader(LIMIT))
    )
    assert engine.last_request.path == "/v1/completions"
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == "echo: once"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 2


async def test_a_stream_without_usage_still_ends(adapter: Adapter, engine: FakeEngine) -> None:
    chunks = await collect(
        chat_stream(adapter, target(engine, "no-usage"), HELLO, ChunkReader(LIMIT))
    )
    assert chat_text(chunks) == "echo: hello there"
    assert all(chunk["choices"] for chunk in chunks)


async def test_a_stream_closed_without_done_is_an_upstream_error(
    adapter: Adapter, engine: FakeEngine
) -> None:
    received: list[JSON] = []
    with pytest.raises(UpstreamError) as caught:
        async with chat_stream(
            adapter, target(engine, "cut-3"), HELLO, ChunkReader(LIMIT)
        ) as batches:
            async for batch in batches:
                received.extend(batch)
    assert chat_text(received) == "echo: hello"  # what came is handed on first
    assert caught.value.status == 502
    assert "ended its stream before the stream was complete" in caught.value.message


async def test_a_connection_dropped_mid_stream_is_an_upstream_error(
    adapter: Adapter, engine: FakeEngine
) -> None:
    received: list[JSON] = []
    with pytest.raises(UpstreamError) as caught:
        async with chat_stream(
            adapter, target(engine, "drop-2"), HELLO, ChunkReader(LIMIT)
        ) as batches:
            async for batch in batches:
                received.extend(batch)
    assert len(received) == 2
    assert caught.value.status == 502


async def test_an_error_event_mid_stream_raises(adapter: Adapter, engine: FakeEngine) -> None:
    received: list[JSON] = []
    with pytest.raises(UpstreamRefused) as caught:
        async with chat_stream(
            adapter, target(engine, "error-after-2"), HELLO, ChunkReader(LIMIT)
        ) as batches:
            async for batch in batches:
                received.extend(batch)
    assert len(received) == 2
    assert not caught.value.retryable
    assert caught.value.status == 502


@pytest.mark.parametrize("knobs", ["", "+joined"])
async def test_an_error_event_after_chunks_of_the_same_read_delivers_them_first(
    adapter: Adapter, engine: FakeEngine, knobs: str
) -> None:
    received: list[JSON] = []
    reads = 0
    with pytest.raises(UpstreamRefused):
        async with chat_stream(
            adapter, target(engine, "error-after-3" + knobs), HELLO, ChunkReader(LIMIT)
        ) as batches:
            async for batch in batches:
                reads += 1
                received.extend(batch)
    assert chat_text(received) == "echo: hello"
    if knobs:
        assert reads == 1, "one write upstream, so one batch"


async def test_a_stream_read_at_once_is_one_batch_in_order(
    adapter: Adapter, engine: FakeEngine
) -> None:
    async with chat_stream(adapter, target(engine, "joined"), HELLO, ChunkReader(LIMIT)) as batches:
        seen = [list(batch) async for batch in batches]
    assert len(seen) == 1
    assert chat_text(seen[0]) == "echo: hello there"
    assert seen[0][-1]["usage"]["completion_tokens"] == 3


async def test_a_malformed_event_is_an_upstream_error(adapter: Adapter, engine: FakeEngine) -> None:
    with pytest.raises(UpstreamError):
        await collect(chat_stream(adapter, target(engine, "junk"), HELLO, ChunkReader(LIMIT)))


@pytest.mark.parametrize("how", ["break", "exception"])
async def test_leaving_a_stream_early_closes_the_upstream(
    adapter: Adapter, engine: FakeEngine, how: str
) -> None:
    with pytest.raises(RuntimeError) if how == "exception" else nullcontext():
        async with chat_stream(
            adapter, target(engine, "slow-0.02+words-200"), HELLO, ChunkReader(LIMIT)
        ) as batches:
            async for batch in batches:
                if any(chunk["choices"][0]["delta"].get("content") for chunk in batch):
                    if how == "exception":
                        raise RuntimeError("the caller went away")
                    break
    async with asyncio.timeout(5):
        await engine.wait_for_cancelled_streams(1)
    assert engine.completed_streams == 0


# Failures


def _call(adapter: Adapter, way: str, target: Target) -> Any:
    if way == "chat":
        return chat(adapter, target, HELLO)
    if way == "completion":
        return adapter.completion(target, PROMPT)
    return collect(chat_stream(adapter, target, HELLO, ChunkReader(LIMIT)))


WAYS = ["chat", "completion", "chat_stream"]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("status", [500, 503, 429, 401, 403, 404])
async def test_channel_failures_are_retryable_and_name_only_the_channel(
    adapter: Adapter, engine: FakeEngine, way: str, status: int
) -> None:
    with pytest.raises(UpstreamRefused) as caught:
        await _call(adapter, way, target(engine, f"fail-{status}"))
    error = caught.value
    assert error.retryable
    assert (error.status, error.upstream_status) == (502, status)
    assert error.message == f"The upstream channel `main` failed (status {status})."


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("status", [400, 422])
async def test_request_refusals_relay_the_upstreams_status_and_message(
    adapter: Adapter, engine: FakeEngine, way: str, status: int
) -> None:
    with pytest.raises(UpstreamRefused) as caught:
        await _call(adapter, way, target(engine, f"fail-{status}"))
    error = caught.value
    assert not error.retryable
    assert (error.status, error.upstream_status) == (status, status)
    assert error.message == f"Fake engine failure (status {status})."


async def test_a_refused_channel_key_never_appears_in_the_error(adapter: Adapter) -> None:
    async with FakeEngine(api_key="the-right-key") as engine:
        with pytest.raises(UpstreamRefused) as caught:
            await chat(adapter, target(engine), HELLO)
    assert caught.value.retryable
    assert caught.value.upstream_status == 401
    assert CHANNEL_KEY not in str(caught.value.body())


@pytest.mark.parametrize("way", WAYS)
async def test_an_unreachable_upstream_is_a_502_naming_no_address(
    adapter: Adapter, way: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = Target("main", f"http://127.0.0.1:{port}/v1", CHANNEL_KEY, "m", 1.0, 1.0)
    with pytest.raises(UpstreamError) as caught:
        await _call(adapter, way, unreachable)
    error = caught.value
    assert type(error) is UpstreamUnreachable  # the whole channel's fault, for its breaker
    assert error.status == 502
    assert "127.0.0.1" not in error.message
    assert str(port) not in error.message
    assert CHANNEL_KEY not in error.message


@pytest.mark.parametrize("way", WAYS)
async def test_an_upstream_too_slow_to_answer_is_a_504(
    adapter: Adapter, engine: FakeEngine, way: str
) -> None:
    with pytest.raises(UpstreamTimeout) as caught:
        await _call(adapter, way, target(engine, "hang-2", read_timeout=0.1))
    assert caught.value.status == 504


async def test_an_upstream_too_slow_mid_stream_is_a_504(
    adapter: Adapter, engine: FakeEngine
) -> None:
    with pytest.raises(UpstreamTimeout):
        await collect(
            chat_stream(
                adapter, target(engine, "slow-2", read_timeout=0.1), HELLO, ChunkReader(LIMIT)
            )
        )


# The registry


def test_openai_compatible_types_share_one_adapter(session: HttpClient) -> None:
    registry = ProviderRegistry.default(session)
    assert frozenset(OPENAI_COMPATIBLE_TYPES) <= registry.types()
    assert {"openai-audio", "supertonic", "speaches"} <= registry.types()
    adapters = {id(registry.serving(CHAT, name)) for name in OPENAI_COMPATIBLE_TYPES}
    adapters |= {id(registry.serving(COMPLETION, name)) for name in OPENAI_COMPATIBLE_TYPES}
    assert len(adapters) == 1


def test_an_unknown_type_is_a_key_error_naming_the_known_ones(
    session: HttpClient,
) -> None:
    registry = ProviderRegistry.default(session)
    with pytest.raises(UnknownProviderType) as caught:
        registry.serving(CHAT, "carrier-pigeon")
    assert isinstance(caught.value, KeyError)
    assert "`carrier-pigeon`" in str(caught.value)
    assert "openai" in str(caught.value)
