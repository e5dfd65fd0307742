"""A channel of ``type: vertex``: Gemini and Claude models on Vertex AI, reached by OpenAI
chat callers (``openai`` SDK) and Messages callers (``anthropic`` SDK), signed with an
access token minted from a service account (a throwaway RSA key made here) whose JWT the
fake's token endpoint verifies; one mint serves many calls, and no token reaches a log."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from parley.runtime.circuit import State
from parley.settings import ConfigError, load_settings
from tests.api.harness import (
    Gateway,
    call,
    local_state,
    records,
    starting,
    streamed_text,
    usage_stream,
)
from tests.upstreams.vertex import FakeVertex

HELLO = [{"role": "user", "content": "hello there"}]
EMAIL = "parley@parley-test.iam.gserviceaccount.com"


def make_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def service_account(key: rsa.RSAPrivateKey, token_uri: str, path: Path) -> Path:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    account = {
        "type": "service_account",
        "project_id": "parley-test",
        "private_key_id": "k1",
        "private_key": pem,
        "client_email": EMAIL,
        "token_uri": token_uri,
    }
    path.write_text(json.dumps(account))
    return path


def vertex_config(vertex: FakeVertex, credentials: Path, workdir: Path) -> dict[str, Any]:
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "gcp",
                "type": "vertex",
                "base_url": vertex.base_url,
                "vertex": {
                    "project": vertex.project,
                    "region": vertex.region,
                    "credentials_file": str(credentials),
                },
                "models": [
                    {"name": "gemini-flash", "upstream": "gemini-2.5-flash"},
                    {"name": "gemini-cached", "upstream": "gemini-2.5-flash+cached-500"},
                    {"name": "gemini-quota", "upstream": "gemini-2.5-flash+fail-429+retry-30s"},
                    {"name": "claude-sonnet", "upstream": "claude-sonnet-4@20250514"},
                    {"name": "claude-tool", "upstream": "claude-sonnet-4@20250514+tool"},
                    {
                        "name": "claude-thinks",
                        "upstream": "claude-opus-4@20250514+thinking+cache-5-2",
                    },
                    {"name": "claude-broken", "upstream": "claude-opus-4@20250514+fail-400"},
                    {"name": "vertex-embed", "upstream": "text-embedding-005"},
                    {"name": "gemini-embed", "upstream": "gemini-embedding-001"},
                ],
                "timeouts": {"connect": 2, "read": 5},
            }
        ],
        "models": [
            {"name": "gemini-flash", "vision": True},
            {
                "name": "gemini-cached",
                "prices": {
                    "input_per_1k": "0.0003",
                    "output_per_1k": "0.0025",
                    "cached_input_per_1k": "0.000075",
                },
            },
            {"name": "claude-sonnet"},
            {"name": "claude-tool"},
            {
                "name": "claude-thinks",
                "prices": {
                    "input_per_1k": "0.003",
                    "output_per_1k": "0.015",
                    "cached_input_per_1k": "0.0003",
                    "cache_write_per_1k": "0.00375",
                },
            },
            {"name": "claude-broken"},
            {"name": "gemini-quota"},
            {"name": "vertex-embed", "kind": "embedding", "prices": {"input_per_1k": "0.001"}},
            {"name": "gemini-embed", "kind": "embedding", "prices": {"input_per_1k": "0.001"}},
        ],
    }


@pytest.fixture(scope="module")
def key_pair() -> rsa.RSAPrivateKey:
    return make_key()


@pytest.fixture
async def vertex(key_pair: rsa.RSAPrivateKey) -> AsyncIterator[FakeVertex]:
    async with FakeVertex(key_pair.public_key(), EMAIL) as running:
        yield running


@pytest.fixture
async def gateway(
    vertex: FakeVertex, key_pair: rsa.RSAPrivateKey, tmp_path: Path
) -> AsyncIterator[Gateway]:
    credentials = service_account(key_pair, vertex.token_uri, tmp_path / "sa.json")
    async with starting(lambda: vertex_config(vertex, credentials, tmp_path)) as start:
        yield await start()


async def test_gemini_on_vertex_with_one_minted_token(
    gateway: Gateway, key: str, vertex: FakeVertex, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(100):  # the first token is minted at start-up, before any call
        if vertex.mints:
            break
        await asyncio.sleep(0.01)
    assert vertex.mints == 1 and not any(r.path.startswith("/v1/") for r in vertex.requests)
    client = gateway.client(key)
    reply = await client.chat.completions.create(model="gemini-flash", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "echo: hello there"
    sent = vertex.last_request
    assert sent.path == (
        "/v1/projects/parley-test/locations/us-east5/publishers/google/models/"
        "gemini-2.5-flash:generateContent"
    )
    token = sent.headers["Authorization"].removeprefix("Bearer ")
    assert token in vertex.tokens
    picture = {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}
    await client.chat.completions.create(
        model="gemini-flash",
        messages=[{"role": "user", "content": [picture]}],  # type: ignore[list-item]
    )
    assert vertex.last_request.body["contents"][0]["parts"] == [
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}}
    ]
    chunks = await usage_stream(gateway, key, HELLO, model="gemini-cached")
    assert streamed_text(chunks) == ("echo: hello there")
    assert vertex.last_request.path.endswith(":streamGenerateContent")
    assert vertex.mints == 1
    found = await records(gateway)
    cached = [r for r in found if r.model == "gemini-cached"]
    assert len(cached) == 1
    (record,) = cached
    assert (record.prompt_tokens, record.completion_tokens, record.cached_tokens) == (502, 3, 500)
    assert record.cost_nanos == 2 * 300 + 500 * 75 + 3 * 2500
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "ya29." not in logged and token not in logged


async def test_googles_retry_delay_on_vertex_is_the_breakers_cool_down(
    gateway: Gateway, key: str
) -> None:
    client = gateway.client(key)
    for _ in range(5):  # the breaker's failures in a row
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="gemini-quota", messages=HELLO)  # type: ignore[arg-type]
    (view,) = [v for v in gateway.services.breakers.views("gcp") if v.model.endswith("30s")]
    assert view.state == State.OPEN
    assert view.next_probe_at is not None and view.last_failure_at is not None
    assert view.next_probe_at - view.last_failure_at == pytest.approx(30.0)  # RetryInfo


async def test_claude_on_vertex_through_raw_predict(
    gateway: Gateway, key: str, vertex: FakeVertex
) -> None:
    client = gateway.client(key)
    reply = await client.chat.completions.create(
        model="claude-sonnet",
        messages=[{"role": "system", "content": "Be brief."}, *HELLO],  # type: ignore[list-item]
    )
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    sent = vertex.last_request
    assert sent.path == (
        "/v1/projects/parley-test/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4@20250514:rawPredict"
    )
    assert sent.body == {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}],
        "system": [{"type": "text", "text": "Be brief."}],
    }
    stream = await client.chat.completions.create(
        model="claude-sonnet",
        messages=HELLO,  # type: ignore[arg-type]
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    assert streamed_text(chunks) == ("echo: hello there")
    assert vertex.last_request.path.endswith(":streamRawPredict")
    assert vertex.last_request.body["stream"] is True
    messages = gateway.claude(key)
    async with messages.messages.stream(
        model="claude-tool",
        max_tokens=64,
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
        messages=[{"role": "user", "content": "hello there"}],
    ) as events:
        final = await events.get_final_message()
    assert [block.type for block in final.content] == ["text", "tool_use"]
    assert final.stop_reason == "tool_use"
    gemini = await messages.messages.create(
        model="gemini-flash", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert gemini.content[0].type == "text" and gemini.content[0].text == "echo: hi"
    assert vertex.mints == 1


CLAUDE_PRICE = {"input": 3000, "output": 15000, "cached": 300, "write": 3750}
"""claude-thinks' prices in nano-dollars a token."""


async def test_a_messages_call_to_claude_on_vertex_is_passed_through(
    gateway: Gateway, key: str, vertex: FakeVertex
) -> None:
    messages = gateway.claude(key)
    extra = {"future_field": {"kept": [1, 2]}}
    reply = await messages.messages.create(
        model="claude-thinks",
        max_tokens=64,
        system="Be brief.",
        metadata={"user_id": "u-1"},
        messages=[{"role": "user", "content": "hello there"}],
        extra_body=extra,
        extra_headers={"anthropic-beta": "context-1m-2025-08-07"},
    )
    sent = vertex.last_request
    assert sent.path == (
        "/v1/projects/parley-test/locations/us-east5/publishers/anthropic/models/"
        "claude-opus-4@20250514+thinking+cache-5-2:rawPredict"
    )
    assert sent.body == {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 64,
        "system": "Be brief.",
        "metadata": {"user_id": "u-1"},
        "messages": [{"role": "user", "content": "hello there"}],
        "future_field": {"kept": [1, 2]},
    }
    assert sent.headers["anthropic-beta"] == "context-1m-2025-08-07"
    assert sent.headers["Authorization"].removeprefix("Bearer ") in vertex.tokens
    # Thinking and its signature come back whole: a translation would drop the signature.
    assert [block.type for block in reply.content] == ["thinking", "text"]
    assert reply.content[0].signature  # type: ignore[union-attr]
    assert reply.model == "claude-thinks"
    assert reply.usage.input_tokens == 4 and reply.usage.output_tokens == 6
    caller_body = {
        "model": "claude-thinks",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello there"}]}],
        "future_field": "x",
    }
    async with messages.messages.stream(
        model="claude-thinks",
        max_tokens=64,
        messages=caller_body["messages"],  # type: ignore[arg-type]
        extra_body={"future_field": "x"},
    ) as events:
        final = await events.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.model == "claude-thinks"
    streamed = vertex.last_request
    assert streamed.path.endswith("claude-opus-4@20250514+thinking+cache-5-2:streamRawPredict")
    expected = {k: v for k, v in caller_body.items() if k != "model"}
    assert streamed.body == {**expected, "anthropic_version": "vertex-2023-10-16"}
    assert "anthropic-beta" not in streamed.headers
    found = [r for r in await records(gateway) if r.model == "claude-thinks"]
    # The upstream's counts (the stream has no system prompt: 2 input words, not 4),
    # cache reads and writes priced as such.
    assert sorted(
        (r.prompt_tokens, r.cached_tokens, r.cache_write_tokens, r.completion_tokens) for r in found
    ) == [(2 + 5 + 2, 5, 2, 6), (4 + 5 + 2, 5, 2, 6)]
    assert not any(r.estimated for r in found)
    assert sorted(r.cost_nanos for r in found) == [
        words * CLAUDE_PRICE["input"]
        + 5 * CLAUDE_PRICE["cached"]
        + 2 * CLAUDE_PRICE["write"]
        + 6 * CLAUDE_PRICE["output"]
        for words in (2, 4)
    ]


async def test_claude_on_vertex_counts_tokens_and_refuses_in_anthropics_envelope(
    gateway: Gateway, key: str, vertex: FakeVertex
) -> None:
    messages = gateway.claude(key)
    counted = await messages.messages.count_tokens(
        model="claude-thinks",
        system="one two",
        messages=[{"role": "user", "content": "three four five"}],
    )
    assert counted.input_tokens == 5
    sent = vertex.last_request
    assert sent.path == (
        "/v1/projects/parley-test/locations/us-east5/publishers/anthropic/models/"
        "count-tokens:rawPredict"
    )
    assert sent.body == {
        "anthropic_version": "vertex-2023-10-16",
        "model": "claude-opus-4@20250514+thinking+cache-5-2",
        "system": "one two",
        "messages": [{"role": "user", "content": "three four five"}],
    }
    status, body = await call(
        gateway,
        "POST",
        "/v1/messages",
        key,
        json={"model": "claude-broken", "max_tokens": 8, "messages": HELLO},
    )
    assert status == 400
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "Fake failure" in body["error"]["message"]
    status, body = await call(
        gateway,
        "POST",
        "/v1/messages",
        key,
        json={"model": "claude-broken", "max_tokens": 8, "messages": HELLO, "stream": True},
    )
    assert status == 400 and body["type"] == "error"


async def test_embeddings_on_vertex_through_predict_billed_by_its_token_counts(
    gateway: Gateway, key: str, vertex: FakeVertex
) -> None:
    client = gateway.client(key)
    embedded = await client.embeddings.create(
        model="vertex-embed",
        input=["one two", "three"],
        dimensions=4,
        extra_body={"task_type": "RETRIEVAL_DOCUMENT"},
    )
    assert [item.embedding for item in embedded.data] == [
        [7.0, 2.0, 0.5, 0.5],
        [5.0, 1.0, 0.5, 0.5],
    ]
    assert embedded.usage.prompt_tokens == 3 and embedded.usage.total_tokens == 3
    sent = vertex.last_request
    assert sent.path == (
        "/v1/projects/parley-test/locations/us-east5/publishers/google/models/"
        "text-embedding-005:predict"
    )
    assert sent.body == {
        "instances": [
            {"content": "one two", "task_type": "RETRIEVAL_DOCUMENT"},
            {"content": "three", "task_type": "RETRIEVAL_DOCUMENT"},
        ],
        "parameters": {"outputDimensionality": 4},
    }
    assert sent.headers["Authorization"].removeprefix("Bearer ") in vertex.tokens
    # The SDK asks for base64 by default: Parley encodes Vertex's numbers so.
    status, body = await call(
        gateway,
        "POST",
        "/v1/embeddings",
        key,
        json={"model": "vertex-embed", "input": "four words in here", "encoding_format": "base64"},
    )
    assert status == 200
    vector = base64.b64decode(body["data"][0]["embedding"])
    assert struct.unpack("<3f", vector) == (18.0, 4.0, 0.5)
    assert body["usage"] == {"prompt_tokens": 4, "total_tokens": 4}
    assert vertex.last_request.body == {"instances": [{"content": "four words in here"}]}
    found = [r for r in await records(gateway) if r.model == "vertex-embed"]
    assert [(r.prompt_tokens, r.estimated, r.cost_nanos) for r in found] == [
        (3, False, 3 * 1000),
        (4, False, 4 * 1000),
    ]


async def test_gemini_embeddings_on_vertex_take_one_text_a_call(
    gateway: Gateway, key: str, vertex: FakeVertex
) -> None:
    client = gateway.client(key)
    texts = [f"text number {n}" for n in range(11)]
    embedded = await client.embeddings.create(model="gemini-embed", input=texts)
    assert [item.index for item in embedded.data] == list(range(11))
    assert [item.embedding[0] for item in embedded.data] == [float(len(t)) for t in texts]
    assert embedded.usage.prompt_tokens == 33
    predicts = [r for r in vertex.requests if r.path.endswith("gemini-embedding-001:predict")]
    assert sorted(r.body["instances"][0]["content"] for r in predicts) == sorted(texts)
    # Vertex's refusal is the caller's 400; token ids have no Vertex form.
    status, body = await call(
        gateway,
        "POST",
        "/v1/embeddings",
        key,
        json={"model": "vertex-embed", "input": " ".join(["w"] * 30), "auto_truncate": False},
    )
    assert status == 400 and "limit" in body["error"]["message"]
    status, body = await call(
        gateway, "POST", "/v1/embeddings", key, json={"model": "vertex-embed", "input": [1, 2]}
    )
    assert status == 400 and body["error"]["param"] == "input"


async def test_a_token_the_upstream_refuses_is_the_channels_fault(
    vertex: FakeVertex, tmp_path: Path
) -> None:
    stranger = make_key()  # not the key the fake knows: its JWT fails verification
    credentials = service_account(stranger, vertex.token_uri, tmp_path / "sa.json")
    async with starting(lambda: vertex_config(vertex, credentials, tmp_path)) as start:
        gateway = await start()
        key = await gateway.key(await gateway.group("team"))
        status, body = await call(
            gateway,
            "POST",
            "/v1/chat/completions",
            key,
            json={"model": "gemini-flash", "messages": HELLO},
        )
        assert status == 502
        assert "gcp" in body["error"]["message"]
        assert "PRIVATE" not in str(body) and "eyJ" not in str(body)
        with pytest.raises(openai.APIStatusError):
            await gateway.client(key).chat.completions.create(
                model="claude-sonnet",
                messages=HELLO,  # type: ignore[arg-type]
            )
    assert vertex.mints == 0


@pytest.mark.parametrize(
    ("account", "expected"),
    [
        (None, "cannot read"),
        ("not json", "is not a JSON service-account key file"),
        ({"type": "authorized_user"}, "its type must be service_account"),
        ({"type": "service_account", "client_email": "a@b"}, "has no private_key"),
    ],
)
def test_a_bad_credentials_file_stops_the_start_in_one_line(
    tmp_path: Path, account: Any, expected: str
) -> None:
    credentials = tmp_path / "sa.json"
    if account is not None:
        credentials.write_text(account if isinstance(account, str) else json.dumps(account))
    config = {
        "channels": [
            {
                "name": "gcp",
                "type": "vertex",
                "base_url": "https://us-east5-aiplatform.googleapis.com/v1",
                "vertex": {
                    "project": "parley-test",
                    "region": "us-east5",
                    "credentials_file": str(credentials),
                },
                "models": ["gemini-2.5-flash"],
            }
        ]
    }
    path = tmp_path / "parley.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as failed:
        load_settings(path, {})
    message = str(failed.value)
    assert "channels.0.vertex.credentials_file" in message and expected in message
    assert "\n" not in message
    config["channels"][0].pop("vertex")
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="needs `vertex`"):
        load_settings(path, {})


async def test_a_revoked_token_is_replaced_after_the_upstream_refuses_it(
    gateway: Gateway, key: str, vertex: FakeVertex
) -> None:
    client = gateway.client(key)
    await client.chat.completions.create(model="gemini-flash", messages=HELLO)  # type: ignore[arg-type]
    assert vertex.mints == 1
    vertex.tokens.clear()  # revoked upstream: the next call is refused with a 401
    with pytest.raises(openai.APIStatusError) as refused:
        await client.chat.completions.create(model="claude-sonnet", messages=HELLO)  # type: ignore[arg-type]
    assert refused.value.status_code == 502
    reply = await client.chat.completions.create(model="gemini-flash", messages=HELLO)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "echo: hello there"
    assert vertex.mints == 1  # the fresh token is the only one the fake now knows
    assert vertex.last_request.headers["Authorization"].removeprefix("Bearer ") in vertex.tokens
