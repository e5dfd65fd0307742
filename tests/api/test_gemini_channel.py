"""A channel of ``type: gemini``: OpenAI chat callers (through the official ``openai``
SDK) and Messages callers (through the ``anthropic`` SDK) translated to Google's
``generateContent`` and back; errors mapped, a failing upstream fallen over, usage with
cached and thinking tokens billed to the nano-dollar."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from parley.domain.pricing import Price, usd_to_nanos
from parley.runtime.circuit import State
from tests.api.harness import (
    CHANNEL_KEY,
    Gateway,
    call,
    local_state,
    records,
    starting,
    streamed_text,
    with_backup,
)
from tests.upstreams.gemini import SIGNATURE, FakeGemini

HELLO = [{"role": "user", "content": "hello there"}]
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake pixels").decode()
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a thing up.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }
]
PRICE = Price(
    input_per_1k=usd_to_nanos("0.00125"),
    output_per_1k=usd_to_nanos("0.01"),
    cached_input_per_1k=usd_to_nanos("0.00031"),
)


def gemini_config(upstream_url: str, backup_url: str, workdir: Path) -> dict[str, Any]:
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "google",
                "type": "gemini",
                "base_url": upstream_url,
                "api_key": CHANNEL_KEY,
                "models": [
                    {"name": "gemini-pro", "upstream": "gemini-2.5-pro"},
                    {"name": "gemini-tool", "upstream": "gemini-2.5-pro+tool"},
                    {"name": "gemini-signed", "upstream": "gemini-3-pro+tool+signed"},
                    {"name": "gemini-cached", "upstream": "gemini-2.5-pro+cached-1000+thoughts-7"},
                    {"name": "gemini-busy", "upstream": "gemini-2.5-pro+fail-429"},
                    {"name": "gemini-quota", "upstream": "gemini-2.5-pro+fail-429+retry-30s"},
                    {"name": "gemini-broken", "upstream": "gemini-2.5-pro+error-after-2"},
                    {"name": "gemini-safety", "upstream": "gemini-2.5-pro+safety"},
                    {"name": "gemini-embed", "upstream": "gemini-embedding-001"},
                ],
                "priority": 1,
                "timeouts": {"connect": 2, "read": 5},
            },
            {
                "name": "backup",
                "base_url": backup_url,
                "models": [{"name": "gemini-busy", "upstream": "backup-chat"}],
                "timeouts": {"connect": 2, "read": 5},
            },
        ],
        "models": [
            {"name": "gemini-pro", "vision": True},
            {"name": "gemini-tool"},
            {"name": "gemini-signed"},
            {
                "name": "gemini-cached",
                "prices": {
                    "input_per_1k": "0.00125",
                    "output_per_1k": "0.01",
                    "cached_input_per_1k": "0.00031",
                },
            },
            {"name": "gemini-busy"},
            {"name": "gemini-quota"},
            {"name": "gemini-broken"},
            {"name": "gemini-safety"},
            {"name": "gemini-embed", "kind": "embedding"},
        ],
    }


@pytest.fixture
async def upstream() -> AsyncIterator[FakeGemini]:
    async with FakeGemini(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def gateway(upstream: FakeGemini, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with with_backup(
        lambda backup: gemini_config(upstream.base_url, backup, tmp_path)
    ) as gateway:
        yield gateway


async def streamed_tool_calls(
    client: openai.AsyncOpenAI, model: str
) -> tuple[list[Any], list[Any]]:
    """A streamed chat call offering ``TOOLS``: its chunks, and the tool call pieces in them."""
    stream = await client.chat.completions.create(
        model=model,
        messages=HELLO,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    calls = [
        call
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
        for call in c.choices[0].delta.tool_calls
    ]
    return chunks, calls


async def test_an_openai_chat_call_reaches_a_gemini_channel(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    reply = await gateway.client(key).chat.completions.create(
        model="gemini-pro",
        messages=[{"role": "system", "content": "Be brief."}, *HELLO],  # type: ignore[list-item]
        temperature=0.5,
        top_p=0.9,
        max_tokens=50,
        stop=["END"],
    )
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "gemini-pro" and reply.id.startswith("chatcmpl-")
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (4, 3)
    sent = upstream.last_request
    assert sent.path == "/v1beta/models/gemini-2.5-pro:generateContent"
    assert sent.headers["x-goog-api-key"] == CHANNEL_KEY
    assert "Authorization" not in sent.headers and "key=" not in sent.path
    assert sent.body == {
        "contents": [{"role": "user", "parts": [{"text": "hello there"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {
            "temperature": 0.5,
            "topP": 0.9,
            "maxOutputTokens": 50,
            "stopSequences": ["END"],
        },
    }


async def test_a_streamed_chat_call_to_a_gemini_channel(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    stream = await gateway.client(key).chat.completions.create(
        model="gemini-cached",
        messages=HELLO,  # type: ignore[arg-type]
        reasoning_effort="low",
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = streamed_text(chunks)
    assert text == "echo: hello there"
    reasoning = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    assert reasoning == "Let me echo."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and finishes.count("stop") == 1
    usage = chunks[-1].usage
    assert usage is not None and not chunks[-1].choices
    assert (usage.prompt_tokens, usage.completion_tokens) == (1002, 10)
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 1000
    assert usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == 7
    sent = upstream.last_request
    assert sent.path == "/v1beta/models/gemini-2.5-pro+cached-1000+thoughts-7:streamGenerateContent"
    assert sent.body["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 2048,
        "includeThoughts": True,
    }
    (record,) = await records(gateway)
    assert (record.prompt_tokens, record.completion_tokens) == (1002, 10)
    assert record.cached_tokens == 1000
    assert record.cost_nanos == PRICE.cost(
        prompt_tokens=record.prompt_tokens, completion_tokens=10, cached_tokens=1000
    )
    assert record.cost_nanos == 2 * 1250 + 1000 * 310 + 10 * 10000


async def test_a_tool_round_trip_through_a_gemini_channel(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    client = gateway.client(key)
    first = await client.chat.completions.create(
        model="gemini-tool",
        messages=HELLO,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        tool_choice={"type": "function", "function": {"name": "lookup"}},
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (tool_call,) = choice.message.tool_calls or []
    assert tool_call.function.name == "lookup"  # type: ignore[union-attr]
    assert orjson.loads(tool_call.function.arguments) == {"query": "echo: hello there"}  # type: ignore[union-attr]
    assert tool_call.id.startswith("call_resp-")
    declared = upstream.last_request.body
    assert declared["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "lookup",
                    "description": "Look a thing up.",
                    "parametersJsonSchema": TOOLS[0]["function"]["parameters"],
                }
            ]
        }
    ]
    assert declared["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["lookup"]}
    }
    second = await client.chat.completions.create(
        model="gemini-tool",
        messages=[
            *HELLO,
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": tool_call.id, "content": '{"found": 3}'},
        ],  # type: ignore[list-item]
        tools=TOOLS,  # type: ignore[arg-type]
    )
    assert second.choices[0].message.content == 'result: {"found":3}'
    assert second.choices[0].finish_reason == "stop"
    contents = upstream.last_request.body["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"text": "echo: hello there"},
            {"functionCall": {"name": "lookup", "args": {"query": "echo: hello there"}}},
        ],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "lookup", "response": {"output": {"found": 3}}}}],
    }


async def test_a_streamed_tool_call_and_an_unanswerable_tool_result(
    gateway: Gateway, key: str
) -> None:
    client = gateway.client(key)
    chunks, calls = await streamed_tool_calls(client, "gemini-tool")
    (entry,) = calls
    assert entry.function is not None and entry.function.name == "lookup"
    assert entry.id is not None and entry.id.startswith("call_resp-")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="gemini-tool",
            messages=[*HELLO, {"role": "tool", "tool_call_id": "call_x", "content": "3"}],  # type: ignore[list-item]
        )
    assert "answers no tool call" in refused.value.message


async def test_images_and_json_output_reach_a_gemini_channel(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    client = gateway.client(key)
    picture = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    content = [{"type": "text", "text": "what is this"}, picture]
    reply = await client.chat.completions.create(
        model="gemini-pro",
        messages=[{"role": "user", "content": content}],  # type: ignore[list-item]
        response_format={
            "type": "json_schema",
            "json_schema": {
                "name": "echo",
                "schema": {"type": "object", "properties": {"echo": {"type": "string"}}},
            },
        },
    )
    assert orjson.loads(reply.choices[0].message.content or "") == {
        "echo": "echo: what is this [image/png]"
    }
    sent = upstream.last_request.body
    assert sent["contents"][0]["parts"][1] == {"inlineData": {"mimeType": "image/png", "data": PNG}}
    assert sent["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object", "properties": {"echo": {"type": "string"}}},
    }
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="gemini-pro",
            messages=[{"role": "user", "content": [remote]}],  # type: ignore[list-item]
        )
    assert "data URL" in refused.value.message
    assert refused.value.body["param"] == "messages[0].content[0]"  # type: ignore[index]


async def test_gemini_errors_are_mapped(gateway: Gateway, key: str, upstream: FakeGemini) -> None:
    client = gateway.client(key)
    busy = await client.chat.completions.create(model="gemini-busy", messages=HELLO)  # type: ignore[arg-type]
    assert busy.choices[0].message.content  # the 429 fell over to the backup channel
    assert upstream.last_request.path.endswith("+fail-429:generateContent")
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="gemini-pro",
            messages=HELLO,  # type: ignore[arg-type]
            stop=["a", "b", "c", "d", "e", "f"],
        )
    assert refused.value.body["param"] == "stop"  # type: ignore[index]
    filtered = await client.chat.completions.create(model="gemini-safety", messages=HELLO)  # type: ignore[arg-type]
    assert filtered.choices[0].finish_reason == "content_filter"
    assert filtered.choices[0].message.content is None
    stream = await client.chat.completions.create(
        model="gemini-broken",
        messages=HELLO,  # type: ignore[arg-type]
        stream=True,
    )
    with pytest.raises(openai.APIError) as failed:
        async for _ in stream:
            pass
    assert "google" in str(failed.value.message)
    assert CHANNEL_KEY not in str(failed.value.message)


async def test_googles_retry_delay_is_the_breakers_cool_down(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    client = gateway.client(key)
    for _ in range(5):  # the breaker's failures in a row
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="gemini-quota", messages=HELLO)  # type: ignore[arg-type]
    assert "retry-after" not in upstream.last_request.headers
    (view,) = [v for v in gateway.services.breakers.views("google") if v.model.endswith("30s")]
    assert view.state == State.OPEN
    assert view.next_probe_at is not None and view.last_failure_at is not None
    assert view.next_probe_at - view.last_failure_at == pytest.approx(30.0)  # RetryInfo


async def test_a_refused_request_relays_googles_message(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    upstream.behaviour = upstream.behaviour.__class__(fail=400)
    status, body = await call(
        gateway,
        "POST",
        "/v1/chat/completions",
        key,
        json={"model": "gemini-pro", "messages": HELLO},
    )
    assert status == 400
    assert body["error"]["message"] == "Fake failure."
    assert body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["error"]["type"] == "invalid_request_error"


async def test_a_bad_channel_key_is_the_channels_fault(
    upstream: FakeGemini, tmp_path: Path
) -> None:
    def config() -> dict[str, Any]:
        found = gemini_config(upstream.base_url, upstream.base_url, tmp_path)
        found["channels"][0]["api_key"] = "AIza-wrong-key"
        return found

    async with starting(config) as start:
        gateway = await start()
        key = await gateway.key(await gateway.group("team"))
        status, body = await call(
            gateway,
            "POST",
            "/v1/chat/completions",
            key,
            json={"model": "gemini-pro", "messages": HELLO},
        )
    assert status == 502
    assert "AIza" not in orjson.dumps(body).decode()
    assert "API key not valid" not in orjson.dumps(body).decode()


async def test_a_messages_caller_reaches_a_gemini_channel(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    client = gateway.claude(key)
    message = await client.messages.create(
        model="gemini-cached",
        max_tokens=100,
        system="Be brief.",
        messages=[{"role": "user", "content": "hello there"}],
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == "echo: hello there"
    assert message.stop_reason == "end_turn"
    assert message.usage.cache_read_input_tokens == 1000
    assert (message.usage.input_tokens, message.usage.output_tokens) == (4, 10)
    assert upstream.last_request.body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    async with client.messages.stream(
        model="gemini-tool",
        max_tokens=100,
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
        messages=[{"role": "user", "content": "hello there"}],
    ) as stream:
        final = await stream.get_final_message()
    assert [block.type for block in final.content] == ["text", "tool_use"]
    assert final.stop_reason == "tool_use"
    tool_use = final.content[1]
    assert tool_use.type == "tool_use" and tool_use.input == {"query": "echo: hello there"}
    answered = await client.messages.create(
        model="gemini-tool",
        max_tokens=100,
        tools=[{"name": "lookup", "input_schema": {"type": "object"}}],
        messages=[
            {"role": "user", "content": "hello there"},
            {"role": "assistant", "content": final.content},  # type: ignore[typeddict-item]
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "42"}],
            },
        ],
    )
    assert answered.content[0].type == "text" and answered.content[0].text == "result: 42"
    found = await records(gateway)
    assert len(found) == 3
    assert found[0].cost_nanos == PRICE.cost(
        prompt_tokens=1004, completion_tokens=10, cached_tokens=1000
    )


async def test_embeddings_and_completions_on_a_gemini_channel(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    client = gateway.client(key)
    embedded = await client.embeddings.create(
        model="gemini-embed", input=["one two", "three"], dimensions=4
    )
    assert [item.embedding for item in embedded.data] == [
        [7.0, 2.0, 0.5, 0.5],
        [5.0, 1.0, 0.5, 0.5],
    ]
    assert upstream.last_request.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    completed = await client.completions.create(model="gemini-pro", prompt="once upon")
    assert completed.choices[0].text == "echo: once upon"
    assert completed.choices[0].finish_reason == "stop"


async def test_a_thought_signature_rides_in_the_call_id_and_goes_back(
    gateway: Gateway, key: str, upstream: FakeGemini
) -> None:
    client = gateway.client(key)
    _, calls = await streamed_tool_calls(client, "gemini-signed")
    (entry,) = calls
    assert entry.id is not None and re.fullmatch(r"[A-Za-z0-9_-]+", entry.id)
    assert entry.function is not None
    assistant = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": entry.id,
                "type": "function",
                "function": {"name": entry.function.name, "arguments": entry.function.arguments},
            }
        ],
    }
    answered = await client.chat.completions.create(
        model="gemini-signed",
        messages=[*HELLO, assistant, {"role": "tool", "tool_call_id": entry.id, "content": "7"}],  # type: ignore[list-item]
        tools=TOOLS,  # type: ignore[arg-type]
    )
    assert answered.choices[0].message.content == "result: 7"
    model_turn = upstream.last_request.body["contents"][1]
    assert model_turn["parts"][0]["thoughtSignature"] == SIGNATURE
    unsigned = {**assistant, "tool_calls": [{**assistant["tool_calls"][0], "id": "call_1"}]}
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(
            model="gemini-signed",
            messages=[*HELLO, unsigned, {"role": "tool", "tool_call_id": "call_1", "content": "7"}],  # type: ignore[list-item]
            tools=TOOLS,  # type: ignore[arg-type]
        )
    assert "thought_signature" in refused.value.message


async def test_a_streamed_completion_on_a_gemini_channel(gateway: Gateway, key: str) -> None:
    stream = await gateway.client(key).completions.create(
        model="gemini-pro", prompt="once upon", stream=True, max_tokens=2
    )
    chunks = [chunk async for chunk in stream]
    assert all(chunk.object == "text_completion" for chunk in chunks)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "echo: once"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
