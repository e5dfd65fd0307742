"""A chat stream whose events arrive one a read (how engines send tokens) is relayed by
its learned shape (``dialects/openai_relay.py``), through the real client, adapter and relay:
the caller gets what a stream read the dict way gets — the caller's model name, one id
with the caller's prefix, the same text — and the call is metered the same."""

from __future__ import annotations

from typing import Any

import pytest

from parley.dialects import openai_relay
from tests.api.harness import Gateway, records, usage_stream
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

MESSAGES: Any = [{"role": "user", "content": "hello there friend"}]
WORDS = 12


async def streamed(gateway: Gateway, key: str) -> tuple[list[Any], Any]:
    chunks = await usage_stream(gateway, key, MESSAGES)
    return chunks, chunks[-1].usage


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def test_one_event_reads_are_relayed_by_shape_as_the_dict_way_would(
    gateway: Gateway, key: str, engine: FakeEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bytes] = []
    feed = openai_relay.OpenAIRelay.feed

    def counted(relay: openai_relay.OpenAIRelay, data: bytes) -> list[bytes]:
        before = relay.shaped
        out = feed(relay, data)
        if relay.shaped > before and data.count(b"\n\n") == 1:  # a read of one event
            taken.append(data)
        return out

    monkeypatch.setattr(openai_relay.OpenAIRelay, "feed", counted)

    engine.behaviour = Behaviour(joined=True, words=WORDS)  # one read: the dict way
    whole, whole_usage = await streamed(gateway, key)
    assert not taken
    engine.behaviour = Behaviour(delay=0.01, words=WORDS)  # one event a read
    shaped, shaped_usage = await streamed(gateway, key)
    assert len(taken) >= WORDS // 2, "most text reads went by their shape"

    assert text_of(shaped) == text_of(whole) and text_of(shaped)
    assert {c.model for c in shaped} == {"chat-large"}  # the caller's name, never upstream's
    (stream_id,) = {c.id for c in shaped}
    assert stream_id.startswith("chatcmpl-")
    assert [len(c.choices) for c in shaped] == [len(c.choices) for c in whole]
    assert shaped_usage == whole_usage
    first, second = await records(gateway)
    assert (second.prompt_tokens, second.completion_tokens, second.cost_nanos) == (
        first.prompt_tokens,
        first.completion_tokens,
        first.cost_nanos,
    )
    assert not second.estimated and second.status == 200
