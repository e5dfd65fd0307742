"""A stream whose upstream sends no usage (llama.cpp's server never does, even when asked):
Parley meters it by its own count and gives that count to a caller who asked for usage."""

from __future__ import annotations

from typing import Any

from tests.api.harness import StartGateway, records, usage_stream

MESSAGES: Any = [{"role": "user", "content": "one two three"}]


def without_usage(config: dict[str, Any]) -> None:
    config["channels"][0]["models"][0]["upstream"] = "upstream-chat+no-usage"


async def test_a_caller_who_asked_gets_parleys_count(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(without_usage)
    key = await gateway.key(await gateway.group("team"))
    chunks = await usage_stream(gateway, key, MESSAGES)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.id == chunks[0].id and last.model == "chat-large"
    assert last.object == "chat.completion.chunk"
    (record,) = await records(gateway)
    assert record.estimated
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (
        record.prompt_tokens,
        record.completion_tokens,
    )
    assert record.completion_tokens == max(4, -(-len(text) // 4))  # four content chunks
    assert last.usage.total_tokens == record.prompt_tokens + record.completion_tokens


async def test_a_caller_who_did_not_ask_gets_no_usage_chunk(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(without_usage)
    key = await gateway.key(await gateway.group("team"))
    stream = await gateway.client(key).chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert all(c.usage is None and c.choices for c in chunks)
    (record,) = await records(gateway)
    assert record.completion_tokens > 0 and record.estimated


async def test_a_classic_completion_stream_gets_its_own_object(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(without_usage)
    key = await gateway.key(await gateway.group("team"))
    stream = await gateway.client(key).completions.create(
        model="chat-large", prompt="one two", stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert chunks[-1].object == "text_completion"
