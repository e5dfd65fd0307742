"""The contract every chat adapter keeps, whatever its upstream's dialect: through a real
Parley, with the official ``openai`` and ``anthropic`` SDKs, against each provider's fake.

An OpenAI or Messages caller gets the same shapes from every channel type: a plain reply,
a stream, a tool call and its result, an image, JSON output (or a 400 naming
``response_format`` where the upstream has no such thing), errors (a 400 relayed, a 5xx
told without the channel's key), and usage billed to the nano-dollar with cached tokens.

**Adding a provider** is one entry of ``CASES``: a ``Case`` whose ``start`` runs the
provider's fake (``tests/upstreams/``) and yields an ``Upstream``: the channel's settings
but ``name`` and ``models``, the fake's base model name, and how to read the body it last
received. The fake must echo the last user text as ``"echo: <text>"`` with usage in
words, take ``+``-separated knobs in the model name (``fail-N``, and the case's
``tool_knob`` and ``cached_knob``), and call the first offered tool with
``{"query": <the echo>}`` under the tool knob (``bad_knob`` and ``down_knob`` when its
failure knobs are spelled otherwise). ``cached_usage`` is what the cached knob
makes the usage of "hello there" (prompt, completion, cached tokens); ``json_sent`` says
how the upstream's body asks for JSON (``None``: the adapter refuses ``response_format``).
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import orjson
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from parley.domain.pricing import Price, usd_to_nanos
from tests.api.harness import CHANNEL_KEY, Gateway, local_state, records, starting
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.azure import API_VERSIONS, FakeAzure
from tests.upstreams.bedrock import AwsKeys, FakeBedrock
from tests.upstreams.gemini import FakeGemini
from tests.upstreams.openai_compatible import FakeEngine
from tests.upstreams.server import ReceivedRequest
from tests.upstreams.vertex import FakeVertex

HELLO = [{"role": "user", "content": "hello there"}]
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n contract pixels").decode()
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
]
PRICE = Price(
    input_per_1k=usd_to_nanos("0.002"),
    output_per_1k=usd_to_nanos("0.008"),
    cached_input_per_1k=usd_to_nanos("0.0005"),
)


@dataclass(frozen=True)
class Upstream:
    channel: dict[str, Any]
    """The channel's settings but ``name`` and ``models`` (``type``, ``base_url``...)."""
    model: str
    requests: list[ReceivedRequest]

    @property
    def last_body(self) -> Any:
        return self.requests[-1].body


@dataclass(frozen=True)
class Case:
    id: str
    start: Callable[[Path], AbstractAsyncContextManager[Upstream]]
    tool_knob: str
    cached_knob: str
    cached_usage: tuple[int, int, int]
    json_sent: Callable[[Any], bool] | None
    bad_knob: str = "fail-400"
    """Makes the fake refuse the request itself (a 400 whose message says ``Fake``)."""
    down_knob: str = "fail-503"
    """Makes the fake fail as the upstream's own fault (a 5xx)."""


@asynccontextmanager
async def openai_compatible(workdir: Path) -> AsyncIterator[Upstream]:
    async with FakeEngine(api_key=CHANNEL_KEY) as engine:
        channel = {"type": "openai", "base_url": engine.base_url, "api_key": CHANNEL_KEY}
        yield Upstream(channel, "chat-up", engine.requests)


@asynccontextmanager
async def anthropic_messages(workdir: Path) -> AsyncIterator[Upstream]:
    async with FakeAnthropic(api_key=CHANNEL_KEY) as fake:
        channel = {"type": "anthropic", "base_url": fake.base_url, "api_key": CHANNEL_KEY}
        yield Upstream(channel, "claude-up", fake.requests)


@asynccontextmanager
async def gemini(workdir: Path) -> AsyncIterator[Upstream]:
    async with FakeGemini(api_key=CHANNEL_KEY) as fake:
        channel = {"type": "gemini", "base_url": fake.base_url, "api_key": CHANNEL_KEY}
        yield Upstream(channel, "gemini-up", fake.requests)


@asynccontextmanager
async def bedrock(workdir: Path) -> AsyncIterator[Upstream]:
    keys = AwsKeys("AKIACONTRACT0001", "contract/secret")
    async with FakeBedrock(credentials=keys, region="us-east-1") as fake:
        aws = {"region": "us-east-1", "access_key_id": keys.access_key_id}
        channel = {
            "type": "bedrock",
            "base_url": fake.endpoint,
            "aws": {**aws, "secret_access_key": keys.secret_access_key},
        }
        yield Upstream(channel, "anthropic.claude-up", fake.requests)


@asynccontextmanager
async def azure(workdir: Path) -> AsyncIterator[Upstream]:
    async with FakeAzure(api_key=CHANNEL_KEY, deployments={"gpt4o": "gpt-4o"}) as fake:
        channel = {
            "type": "azure-openai",
            "base_url": fake.endpoint,
            "api_key": CHANNEL_KEY,
            "azure": {"api_version": min(API_VERSIONS)},
        }
        yield Upstream(channel, "gpt4o", fake.requests)


@functools.cache
def _service_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _vertex(model: str) -> Callable[[Path], AbstractAsyncContextManager[Upstream]]:
    @asynccontextmanager
    async def start(workdir: Path) -> AsyncIterator[Upstream]:
        key = _service_key()
        email = "contract@parley-test.iam.gserviceaccount.com"
        async with FakeVertex(key.public_key(), email) as fake:
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ).decode()
            account = {
                "type": "service_account",
                "client_email": email,
                "private_key": pem,
                "token_uri": fake.token_uri,
            }
            credentials = workdir / "service-account.json"
            credentials.write_text(json.dumps(account))
            vertex = {"project": fake.project, "region": fake.region}
            channel = {
                "type": "vertex",
                "base_url": fake.base_url,
                "vertex": {**vertex, "credentials_file": str(credentials)},
            }
            yield Upstream(channel, model, fake.requests)

    return start


def _gemini_json(body: Any) -> bool:
    return body["generationConfig"]["responseMimeType"] == "application/json"


CASES = [
    Case(
        "openai-compatible",
        openai_compatible,
        tool_knob="tools",
        cached_knob="cached-2",
        cached_usage=(2, 3, 2),
        json_sent=lambda body: body["response_format"] == {"type": "json_object"},
    ),
    Case(
        "anthropic",
        anthropic_messages,
        tool_knob="tool",
        cached_knob="cache-1000-0",
        cached_usage=(1002, 3, 1000),
        json_sent=None,
    ),
    Case(
        "gemini",
        gemini,
        tool_knob="tool",
        cached_knob="cached-1000",
        cached_usage=(1002, 3, 1000),
        json_sent=_gemini_json,
    ),
    Case(
        "vertex-gemini",
        _vertex("gemini-up"),
        tool_knob="tool",
        cached_knob="cached-1000",
        cached_usage=(1002, 3, 1000),
        json_sent=_gemini_json,
    ),
    Case(
        "bedrock",
        bedrock,
        tool_knob="tool",
        cached_knob="cache-1000-0",
        cached_usage=(1002, 3, 1000),
        json_sent=lambda body: (
            body["toolConfig"]["toolChoice"] == {"tool": {"name": "parley_json_output"}}
        ),
        bad_knob="fail-ValidationException",
        down_knob="fail-ServiceUnavailableException",
    ),
    Case(
        "azure-openai",
        azure,
        tool_knob="tools",
        cached_knob="cached-2",
        cached_usage=(4, 3, 2),
        json_sent=lambda body: body["response_format"] == {"type": "json_object"},
    ),
    Case(
        "vertex-claude",
        _vertex("claude-up"),
        tool_knob="tool",
        cached_knob="cache-1000-0",
        cached_usage=(1002, 3, 1000),
        json_sent=None,
    ),
]


@dataclass(frozen=True)
class Running:
    gateway: Gateway
    key: str
    upstream: Upstream
    case: Case

    @property
    def client(self) -> openai.AsyncOpenAI:
        return self.gateway.client(self.key)

    @property
    def claude(self) -> anthropic.AsyncAnthropic:
        client = anthropic.AsyncAnthropic(
            base_url=self.gateway.base_url, api_key=self.key, max_retries=0
        )
        self.gateway.clients.append(client)  # type: ignore[arg-type]
        return client


def config(case: Case, upstream: Upstream, workdir: Path) -> dict[str, Any]:
    base = upstream.model
    knobs = {
        "plain": base,
        "tool": f"{base}+{case.tool_knob}",
        "cached": f"{base}+{case.cached_knob}",
        "bad": f"{base}+{case.bad_knob}",
        "down": f"{base}+{case.down_knob}",
    }
    channel = {
        **upstream.channel,
        "name": "contract",
        "models": [{"name": name, "upstream": model} for name, model in knobs.items()],
        "timeouts": {"connect": 2, "read": 5},
    }
    prices = {"input_per_1k": "0.002", "output_per_1k": "0.008", "cached_input_per_1k": "0.0005"}
    return {
        **local_state(workdir),
        "channels": [channel],
        "models": [
            {"name": "plain", "vision": True},
            {"name": "tool"},
            {"name": "cached", "prices": prices},
            {"name": "bad"},
            {"name": "down"},
        ],
    }


@pytest.fixture(params=CASES, ids=[case.id for case in CASES])
async def running(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Running]:
    case: Case = request.param
    async with (
        case.start(tmp_path) as upstream,
        starting(lambda: config(case, upstream, tmp_path)) as start,
    ):
        gateway = await start()
        key = await gateway.key(await gateway.group("team"))
        yield Running(gateway, key, upstream, case)


async def test_a_plain_reply(running: Running) -> None:
    reply = await running.client.chat.completions.create(model="plain", messages=HELLO)  # type: ignore[arg-type]
    assert reply.object == "chat.completion" and reply.model == "plain"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (2, 3)


async def test_a_stream(running: Running) -> None:
    stream = await running.client.chat.completions.create(
        model="plain",
        messages=HELLO,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    said = [chunk for chunk in chunks if chunk.choices]  # Azure opens with its filter results
    assert all(chunk.object == "chat.completion.chunk" for chunk in said)
    assert said[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: hello there"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [f for f in finishes if f] == ["stop"]
    assert not chunks[-1].choices and chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (2, 3)


async def test_a_tool_round_trip(running: Running) -> None:
    client = running.client
    first = await client.chat.completions.create(
        model="tool",
        messages=HELLO,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id
    assert call.function.name == "lookup"  # type: ignore[union-attr]
    assert orjson.loads(call.function.arguments)["query"].startswith("echo: hello")  # type: ignore[union-attr]
    second = await client.chat.completions.create(
        model="tool",
        messages=[
            *HELLO,
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "42"},
        ],  # type: ignore[list-item]
        tools=TOOLS,  # type: ignore[arg-type]
    )
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content
    assert "42" in orjson.dumps(running.upstream.last_body).decode()


async def test_an_image(running: Running) -> None:
    picture = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    content = [{"type": "text", "text": "look"}, picture]
    reply = await running.client.chat.completions.create(
        model="plain",
        messages=[{"role": "user", "content": content}],  # type: ignore[list-item]
    )
    assert (reply.choices[0].message.content or "").startswith("echo: look")
    assert PNG in orjson.dumps(running.upstream.last_body).decode()


async def test_json_output(running: Running) -> None:
    ask = {"model": "plain", "messages": HELLO, "response_format": {"type": "json_object"}}
    sent = running.case.json_sent
    if sent is None:
        with pytest.raises(openai.BadRequestError) as refused:
            await running.client.chat.completions.create(**ask)  # type: ignore[call-overload]
        assert refused.value.body["param"] == "response_format"  # type: ignore[index]
        return
    reply = await running.client.chat.completions.create(**ask)  # type: ignore[call-overload]
    assert reply.choices[0].message.content
    assert sent(running.upstream.last_body)


async def test_errors(running: Running) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await running.client.chat.completions.create(model="bad", messages=HELLO)  # type: ignore[arg-type]
    assert refused.value.status_code == 400
    assert "Fake" in refused.value.message
    assert refused.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    with pytest.raises(openai.APIStatusError) as failed:
        await running.client.chat.completions.create(model="down", messages=HELLO)  # type: ignore[arg-type]
    assert failed.value.status_code >= 500
    assert "contract" in failed.value.message and CHANNEL_KEY not in failed.value.message
    assert "Fake" not in failed.value.message


async def test_usage_billed_exactly(running: Running) -> None:
    reply = await running.client.chat.completions.create(model="cached", messages=HELLO)  # type: ignore[arg-type]
    prompt, completion, cached = running.case.cached_usage
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (prompt, completion)
    assert reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens == cached
    (record,) = await records(running.gateway)
    assert (record.prompt_tokens, record.completion_tokens) == (prompt, completion)
    assert record.cached_tokens == cached
    expected = PRICE.cost(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)
    assert record.cost_nanos == expected
    assert expected == (prompt - cached) * 2000 + cached * 500 + completion * 8000


async def test_a_messages_caller_gets_the_same_shapes(running: Running) -> None:
    claude = running.claude
    message = await claude.messages.create(
        model="plain", max_tokens=64, messages=[{"role": "user", "content": "hello there"}]
    )
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "text"
    assert message.content[0].text == "echo: hello there"
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (2, 3)
    async with claude.messages.stream(
        model="tool",
        max_tokens=64,
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
        messages=[{"role": "user", "content": "hello there"}],
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [block.type for block in final.content][-1] == "tool_use"


async def test_a_responses_caller_gets_the_same_shapes(running: Running) -> None:
    response = await running.client.responses.create(model="plain", input="hello there")
    assert response.status == "completed"
    assert response.output_text == "echo: hello there"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (2, 3)
    stream = await running.client.responses.create(model="plain", input="hello there", stream=True)
    kinds = [event.type async for event in stream]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
