"""Turning a batch of upstream chunks into the caller's events, and counting what they produced."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from parley.dialects.openai_relay import OpenAIRelay, StreamTally
from parley.domain.usage import UNBOUNDED, Usage


class ChunkShaper:
    """An ``OpenAIRelay`` fed chunks another reader made, each batch's events joined."""

    def __init__(self, model: str, id_prefix: str, include_usage: bool) -> None:
        self.relay = OpenAIRelay(
            model,
            id_prefix,
            "chat.completion.chunk",
            include_usage=include_usage,
            prompt_estimate=0,
            allowance=UNBOUNDED,
            max_event_bytes=1 << 20,
            shapes=False,
        )

    def events(self, batch: list[dict[str, Any]]) -> bytes:
        return b"".join(self.relay.feed_chunks(batch))

    @property
    def tally(self) -> StreamTally:
        return self.relay.tally


def chunk(content: str | None = None, **extra: Any) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    body = {"id": "up-1", "object": "chat.completion.chunk", "model": "engine-name"}
    return {**body, "choices": [{"index": 0, "delta": delta}], **extra}


def events(data: bytes) -> list[dict[str, Any]]:
    assert data.endswith(b"\n\n")
    blocks = data[:-2].split(b"\n\n")
    assert all(block.startswith(b"data: ") for block in blocks)
    return [orjson.loads(block[6:]) for block in blocks]


def test_a_batch_becomes_one_event_per_chunk_with_the_callers_model_and_id() -> None:
    shaper = ChunkShaper("public", "chatcmpl-", True)
    out = events(shaper.events([chunk("Hel"), chunk("lo")]))
    assert [e["choices"][0]["delta"]["content"] for e in out] == ["Hel", "lo"]
    assert {e["model"] for e in out} == {"public"}
    assert {e["id"] for e in out} == {"chatcmpl-up-1"}


def test_an_id_already_prefixed_is_kept_and_a_missing_one_is_made_once() -> None:
    shaper = ChunkShaper("m", "chatcmpl-", True)
    kept = events(shaper.events([chunk("a", id="chatcmpl-x")]))
    assert kept[0]["id"] == "chatcmpl-x"
    shaper = ChunkShaper("m", "chatcmpl-", True)
    made = events(shaper.events([chunk("a", id=None), chunk("b", id=None)]))
    made += events(shaper.events([chunk("c", id=None)]))
    ids = {e["id"] for e in made}
    assert len(ids) == 1
    assert next(iter(ids)).startswith("chatcmpl-")


def test_the_usage_chunk_is_dropped_unless_asked_for() -> None:
    usage = {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    batch = [chunk("hi"), {"id": "up-1", "choices": [], "usage": usage}]
    shaper = ChunkShaper("m", "p-", False)
    assert len(events(shaper.events(batch))) == 1
    assert shaper.tally.usage() == Usage(prompt_tokens=4, completion_tokens=2)
    both = events(ChunkShaper("m", "p-", True).events([dict(c) for c in batch]))
    assert both[-1]["usage"] == usage


def test_usage_riding_on_a_content_chunk_is_removed_but_the_content_kept() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    out = events(ChunkShaper("m", "p-", False).events([chunk("x", usage=usage)]))
    assert "usage" not in out[0]
    assert out[0]["choices"][0]["delta"]["content"] == "x"


def test_a_batch_of_nothing_owed_is_empty() -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    batch = [{"id": "u", "choices": [], "usage": usage}]
    assert ChunkShaper("m", "p-", False).events(batch) == b""


def test_the_estimate_counts_content_reasoning_tool_calls_and_completion_text() -> None:
    tally = StreamTally(prompt_estimate=7)
    tool = {"function": {"name": "get", "arguments": '{"q":1}'}}
    tally.observe(chunk("abcd"))
    tally.observe({"choices": [{"delta": {"role": "assistant", "reasoning_content": "why"}}]})
    tally.observe({"choices": [{"delta": {"role": "assistant", "tool_calls": [tool]}}]})
    tally.observe({"choices": [{"index": 0, "text": "classic"}]})
    tally.observe({"choices": "not a list"})
    tally.observe({"choices": [None, {"delta": None}]})
    assert (tally.characters, tally.pieces) == (4 + 3 + 10 + 7, 4)
    assert tally.usage() == Usage(prompt_tokens=7, completion_tokens=6, estimated=True)
    assert tally.produced


def test_nothing_produced_is_not_billable() -> None:
    tally = StreamTally(5)
    tally.observe(chunk(None))
    assert not tally.produced


@pytest.mark.parametrize(
    ("chunk", "counted"),
    [
        ({"choices": [{"index": 0, "delta": {"content": "abc"}}]}, (3, 1)),
        ({"choices": [{"delta": {"content": ""}}]}, (0, 0)),
        ({"choices": [{"delta": {"content": None}}]}, (0, 0)),
        ({"choices": [{"delta": {"content": 7}}]}, (0, 0)),
        ({"choices": [{"delta": {"role": "assistant", "content": "ab"}}]}, (2, 1)),
        ({"choices": [{"delta": {"content": "ab", "reasoning_content": "cd"}}]}, (4, 1)),
        ({"choices": [{"delta": {"content": "a"}}, {"delta": {"content": "bc"}}]}, (3, 2)),
        ({"choices": [{"delta": {}}]}, (0, 0)),
        ({"choices": [{"text": "classic"}]}, (7, 1)),
        ({"choices": []}, (0, 0)),
        ({"choices": None}, (0, 0)),
        ({"choices": {"delta": {"content": "x"}}}, (0, 0)),
        ({"choices": "x"}, (0, 0)),
        ({"choices": ["x"]}, (0, 0)),
        ({"choices": [{"delta": "text"}]}, (0, 0)),
        ({}, (0, 0)),
    ],
)
def test_every_shape_of_chunk_is_counted_by_the_same_rules(
    chunk: dict[str, Any], counted: tuple[int, int]
) -> None:
    # The common shape (one choice, a delta of text only) is read on a short path; the
    # others by the general rules: both give the same counts.
    tally = StreamTally(0)
    tally.observe(chunk)
    assert (tally.characters, tally.pieces) == counted


def test_usage_is_read_from_a_chunk_whatever_its_choices() -> None:
    usage = {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    tally = StreamTally(0)
    tally.observe({"choices": [{"delta": {"content": "hi"}}], "usage": usage})
    assert tally.usage() == Usage(prompt_tokens=4, completion_tokens=2)
    assert (tally.characters, tally.pieces) == (2, 1)
