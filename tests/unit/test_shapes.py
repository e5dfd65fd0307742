"""Reads relayed by their learned shape (``OpenAIRelay``, ``dialects/chunk_shapes.py``): for
the same upstream bytes, the caller gets what the dict way gives it, counted the same, and
anything the shape does not fit goes the dict way and is judged by its rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from parley.dialects import chunk_shapes as shapes
from parley.dialects import openai_relay
from parley.dialects.openai_relay import DONE, TRIES, StreamTally
from parley.domain.usage import UNBOUNDED
from parley.errors import UpstreamError
from parley.providers.base import Target
from parley.providers.openai.answers import stream_fault
from parley.providers.openai.refusal import stream_failure

TARGET = Target("one", "http://upstream", "sk-secret", "engine-model", 1.0, 1.0)
TEXTS = ["Hel", "lo", ", ", "wor", "ld", "!"]
ESCAPES = ['say \\"hi\\"', 'a "quote"', "back\\slash\\", "two\nlines\r\t", "café", "🙂 ok"]
ESCAPES += ['"},"x":1', '"}],"usage":{"prompt_tokens":1}}', "", "\u2028\x00"]


def chunk(text: str | None = None, *, role: bool = False, **extra: Any) -> dict[str, Any]:
    delta: dict[str, Any] = {} if text is None else {"content": text}
    if role:
        delta = {"role": "assistant", **delta}
    head = {"id": "up-1", "object": "chat.completion.chunk", "created": 1, "model": "engine"}
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
    return {**head, "choices": [choice], **extra}


def read(payload: Any, dumps: Callable[[Any], bytes] = orjson.dumps) -> bytes:
    return b"data: " + dumps(payload) + b"\n\n"


def ascii_dumps(payload: Any) -> bytes:
    """How Python's ``json`` escapes by default (``\\u00e9``, ``\\ud83d\\ude42``)."""
    return json.dumps(payload, separators=(",", ":")).encode()


def stream(texts: list[str], dumps: Callable[[Any], bytes] = orjson.dumps) -> list[bytes]:
    """A chat stream as an engine sends it: one event a read."""
    reads = [read(chunk("", role=True), dumps)]
    reads += [read(chunk(text), dumps) for text in texts]
    finish = chunk()
    finish["choices"][0]["finish_reason"] = "stop"
    usage = {"prompt_tokens": 7, "completion_tokens": len(texts), "total_tokens": 7 + len(texts)}
    reads += [read(finish, dumps), read({**chunk(), "choices": [], "usage": usage}, dumps)]
    return [*reads, b"data: [DONE]\n\n"]


@dataclass
class Relayed:
    events: list[bytes]
    """What each read gave the caller, and the closing (``data: [DONE]`` left out)."""
    tally: StreamTally
    same: int
    """Events relayed by their shape."""
    error: UpstreamError | None


def relay(
    reads: list[bytes], *, shapes: bool, include_usage: bool = False, limit: int = 1 << 20
) -> Relayed:
    """The reads fed to a relay as ``providers/translated.py`` feeds it."""
    relay = openai_relay.OpenAIRelay(
        "public",
        "chatcmpl-",
        "chat.completion.chunk",
        include_usage=include_usage,
        prompt_estimate=5,
        allowance=UNBOUNDED,
        max_event_bytes=limit,
        shapes=shapes,
    )
    out: list[bytes] = []
    error = None
    for data in reads:
        before = relay.shaped
        produced = relay.feed(data)
        assert relay.shaped == before or len(produced) == 1, "a read by its shape alone"
        out.extend(produced)
        if relay.failure is not None:
            error = stream_fault(TARGET, relay.failure, stream_failure)
            break
        if relay.done:
            break
    if error is None:
        out.extend(relay.end())
        last = relay.closing()
        assert last.endswith(DONE)
        out.extend([last[: -len(DONE)]] if last != DONE else [])
    return Relayed(out, relay.tally, relay.shaped, error)


def parsed(events: list[bytes]) -> list[Any]:
    blocks = b"".join(events).split(b"\n\n")
    assert blocks.pop() == b""
    assert all(block.startswith(b"data: ") for block in blocks)
    return [orjson.loads(block[6:]) for block in blocks]


async def both(
    reads: list[bytes], include_usage: bool = False, limit: int = 1 << 20
) -> tuple[Relayed, Relayed]:
    """The shape way and the dict way, for the same reads: the caller's events JSON-equal,
    counted and reported the same, ended by the same error."""
    fast = relay(reads, shapes=True, include_usage=include_usage, limit=limit)
    dicts = relay(reads, shapes=False, include_usage=include_usage, limit=limit)
    assert dicts.same == 0
    assert parsed(fast.events) == parsed(dicts.events)
    assert (fast.tally.characters, fast.tally.pieces) == (
        dicts.tally.characters,
        dicts.tally.pieces,
    )
    assert fast.tally.usage() == dicts.tally.usage()
    assert fast.tally.produced == dicts.tally.produced
    assert str(fast.error) == str(dicts.error)
    return fast, dicts


def texts_of(events: list[bytes]) -> list[str]:
    return [
        event["choices"][0]["delta"]["content"]
        for event in parsed(events)
        if event["choices"] and "content" in event["choices"][0]["delta"]
    ]


@pytest.mark.parametrize("include_usage", [True, False])
async def test_a_stream_relayed_by_its_shape_is_what_the_dict_way_writes(
    include_usage: bool,
) -> None:
    fast, dicts = await both(stream(TEXTS), include_usage)
    assert fast.same == len(TEXTS) - 1  # the first text chunk is parsed, and learned
    assert fast.events == dicts.events  # byte for byte: the upstream escapes as orjson
    events = parsed(fast.events)
    assert {event["model"] for event in events} == {"public"}
    assert {event["id"] for event in events} == {"chatcmpl-up-1"}
    assert texts_of(fast.events) == ["", *TEXTS]
    assert fast.tally.reported is not None and fast.tally.reported.completion_tokens == 6
    assert any("usage" in event for event in events) is include_usage


@pytest.mark.parametrize("include_usage", [True, False])
async def test_chunks_with_a_null_usage_are_relayed_by_their_shape(include_usage: bool) -> None:
    # OpenAI (and this fake's engines) send "usage": null on every chunk of a stream that
    # asked for usage, which Parley's streams always do; the caller who did not ask gets
    # no usage key, the dict way's rule
    reads = [read(chunk("", role=True, usage=None))]
    reads += [read(chunk(text, usage=None)) for text in TEXTS]
    reads += [b"data: [DONE]\n\n"]
    fast, dicts = await both(reads, include_usage)
    assert fast.same == len(TEXTS) - 1
    assert fast.events == dicts.events
    assert all(("usage" in event) is include_usage for event in parsed(fast.events))


async def test_escaped_texts_pass_as_the_upstream_wrote_them() -> None:
    fast, _ = await both(stream(["plain", *ESCAPES]))
    assert fast.same == len(ESCAPES)
    assert texts_of(fast.events) == ["", "plain", *ESCAPES]
    assert fast.tally.characters == len("plain") + sum(len(text) for text in ESCAPES)
    assert fast.tally.pieces == 1 + sum(1 for text in ESCAPES if text)


async def test_texts_escaped_otherwise_are_json_equal() -> None:
    fast, dicts = await both(stream(["plain", *ESCAPES], ascii_dumps))
    assert fast.same == len(ESCAPES)
    assert fast.events != dicts.events  # the upstream's \u00e9 is passed as it is
    assert texts_of(fast.events) == ["", "plain", *ESCAPES]


def between(text_literal: bytes) -> bytes:
    """A read of the learned shape with ``text_literal`` where the text's literal goes."""
    return read(chunk("\x01")).replace(b'"\\u0001"', text_literal)


@pytest.mark.parametrize(
    "middle",
    [
        b'"a","extra":1',  # a delta with two fields: valid, not the shape
        b'"a"} , {"',  # not JSON
        b'"a" "b"',
        b'"a"\n',
        b'"unterminated\\"',
        b'"\xff"',  # not UTF-8
        b"1",
        b' "a"',  # a string with blanks around it: JSON, but not what the dict way writes
        b'"a"\t',
        b'"',
        b"",
        b'"a"}],"usage":{"prompt_tokens":1,"completion_tokens":2},"z":[{"q":"',
    ],
)
async def test_a_middle_that_is_not_one_string_goes_the_dict_way(middle: bytes) -> None:
    reads = stream(["learned"])
    reads.insert(2, between(middle))
    reads.insert(3, read(chunk("after")))
    fast, _ = await both(reads)
    assert fast.same <= 1  # only "after", once the odd read did not end the stream


async def test_a_malformed_middle_ends_the_stream_with_its_error() -> None:
    reads = stream(["learned", "more"])
    reads.insert(3, between(b'"a"} , {"'))
    fast, _ = await both(reads)
    assert fast.same == 1
    assert fast.error is not None and "not a JSON object" in str(fast.error)


async def test_a_head_that_changes_is_learned_again() -> None:
    first = [read(chunk(text)) for text in TEXTS]
    second = [read(chunk(text, id="up-2")) for text in TEXTS]
    fast, _ = await both([*first, *second, b"data: [DONE]\n\n"])
    assert fast.same == 2 * (len(TEXTS) - 1)
    ids = [event["id"] for event in parsed(fast.events)]
    assert ids == ["chatcmpl-up-1"] * len(TEXTS) + ["chatcmpl-up-2"] * len(TEXTS)


async def test_an_error_event_after_shaped_reads_ends_the_stream_with_it() -> None:
    reads = stream(TEXTS)[:5]
    reads.append(read({"error": {"message": "engine failed", "type": "server_error"}}))
    fast, _ = await both(reads)
    assert fast.same == 3
    assert fast.error is not None and "failed during the stream" in str(fast.error)


async def test_reads_of_several_events_go_by_the_shape_event_by_event() -> None:
    reads = stream(TEXTS)
    joined = [reads[0], reads[1], reads[2] + reads[3], reads[4][:30], reads[4][30:], *reads[5:]]
    fast, _ = await both(joined)
    # text 0 learned, 1 and 2 read together by the shape, 3 split (a partial line drops
    # the shape), 4 learned again: text 5 goes by the shape
    assert fast.same == 3


@pytest.mark.parametrize("include_usage", [True, False])
@pytest.mark.parametrize("dumps", [orjson.dumps, ascii_dumps])
async def test_a_stream_read_at_once_is_relayed_by_its_shape(
    include_usage: bool, dumps: Callable[[Any], bytes]
) -> None:
    # What an engine's separate writes become when they arrive faster than they are read:
    # the role chunk, then one text learned from, the rest by the shape, usage, [DONE]
    texts = TEXTS + ESCAPES
    fast, _ = await both([b"".join(stream(texts, dumps))], include_usage=include_usage)
    assert fast.same == len(texts) - 1
    assert texts_of(fast.events) == ["", *texts]
    assert fast.tally.usage().completion_tokens == len(texts)


async def test_a_head_that_changes_within_a_read_is_learned_again() -> None:
    first = [read(chunk(text)) for text in TEXTS]
    second = [read(chunk(text, id="up-2")) for text in TEXTS]
    fast, _ = await both([b"".join(first + second[:3]), b"".join(second[3:])])
    assert fast.same == 2 * (len(TEXTS) - 1)
    ids = [event["id"] for event in parsed(fast.events)]
    assert ids == ["chatcmpl-up-1"] * len(TEXTS) + ["chatcmpl-up-2"] * len(TEXTS)


async def test_an_error_within_a_read_of_the_shape_ends_the_stream_with_it() -> None:
    reads = stream(TEXTS)[:5]
    reads.append(read({"error": {"message": "engine failed", "type": "server_error"}}))
    reads += [read(chunk("after")), b"data: [DONE]\n\n"]
    fast, _ = await both([b"".join(reads)])
    assert fast.same == 3
    assert "after" not in texts_of(fast.events)
    assert fast.error is not None and "failed during the stream" in str(fast.error)


async def test_nothing_after_done_within_a_read_is_relayed() -> None:
    reads = [*stream(TEXTS), read(chunk("after")), read(chunk("more"))]
    fast, _ = await both([b"".join(reads)])
    assert texts_of(fast.events) == ["", *TEXTS]


async def test_a_malformed_event_within_a_read_of_the_shape_ends_the_stream() -> None:
    reads = [read(chunk("learned")), read(chunk("fast")), b'data: "not an object"\n\n']
    fast, _ = await both([b"".join(reads), read(chunk("after"))])
    assert fast.same == 1
    assert fast.error is not None and "not a JSON object" in str(fast.error)


async def test_a_shape_that_never_holds_stops_being_learned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    learned: list[bytes] = []

    def counted(payload: bytes, chunk: dict[str, Any]) -> shapes.Shape | None:
        learned.append(payload)
        return shapes.learn(payload, chunk)

    monkeypatch.setattr(openai_relay, "learn", counted)
    reads = [read(chunk(text, obfuscation=str(index))) for index, text in enumerate(TEXTS * 3)]
    fast, _ = await both(reads)
    assert fast.same == 0
    assert len(learned) == TRIES
    learned.clear()
    fast, _ = await both([b"".join(reads[:3]), b"".join(reads[3:])])  # events read together
    assert fast.same == 0
    assert len(learned) == TRIES


def test_a_literal_found_elsewhere_is_not_learned() -> None:
    payload = orjson.dumps({"choices": [{"delta": {"content": "hi"}}], "z": "hi"})
    assert shapes.learn(payload, orjson.loads(payload)) is None
    payload = orjson.dumps({"z": "hi", "choices": [{"delta": {"content": "hi"}}]})
    shape = shapes.learn(payload, orjson.loads(payload))
    assert shape is not None and shape.chunk(b'"yo"')["z"] == "hi"


@pytest.mark.parametrize(
    "odd",
    [
        chunk("a", usage={"prompt_tokens": 1, "completion_tokens": 1}),
        chunk("a", error=None),
        {**chunk("a"), "choices": [chunk("a")["choices"][0]] * 2},
        chunk("a", role=True),
        {**chunk(), "choices": [{"index": 0, "delta": {"content": 1}}]},
        {**chunk(), "choices": [{"index": 0, "delta": {"tool_calls": "a"}}]},
    ],
)
def test_only_chunks_with_one_text_are_learned(odd: dict[str, Any]) -> None:
    assert shapes.learn(orjson.dumps(odd), odd) is None


async def test_reasoning_is_relayed_by_its_shape_too() -> None:
    def thought(text: str) -> bytes:
        return read({**chunk(), "choices": [{"index": 0, "delta": {"reasoning_content": text}}]})

    reads = [thought(text) for text in TEXTS] + stream(TEXTS)
    fast, _ = await both(reads)
    assert fast.same == 2 * (len(TEXTS) - 1)
    assert fast.tally.characters == 2 * sum(len(text) for text in TEXTS)


async def test_chunks_without_an_id_take_the_id_the_dict_way_gives_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(openai_relay.secrets, "token_hex", lambda size: "made")  # both ways

    def bare(text: str) -> bytes:
        return read({key: value for key, value in chunk(text).items() if key != "id"})

    reads = [bare("a"), bare("b"), read(chunk(role=True, id="up-2")), bare("c"), bare("d")]
    fast, _ = await both(reads)
    assert fast.same == 3
    ids = [event["id"] for event in parsed(fast.events)]
    assert ids == ["chatcmpl-made"] * 2 + ["chatcmpl-up-2"] * 3


async def test_a_read_past_the_event_bound_is_refused_as_the_dict_way_does() -> None:
    long = "x" * 300
    reads = [read(chunk("learned")), read(chunk("short")), read(chunk(long))]
    fast, _ = await both(reads, limit=len(reads[1]) + 50)
    assert fast.same == 1
    assert fast.error is not None and "larger than Parley accepts" in str(fast.error)


async def test_a_partial_line_pending_is_not_jumped_by_a_read_of_the_shape() -> None:
    reads = [read(chunk("learned")), read(chunk("fast")), b'data: {"x', read(chunk("joined"))]
    fast, _ = await both(reads)
    assert fast.same == 1
    assert fast.error is not None and "not a JSON object" in str(fast.error)


async def test_a_shape_that_changes_now_and_then_is_learned_each_time() -> None:
    # llama.cpp's ``created`` is the second the chunk was made: the shape changes with it
    reads = [read(chunk(text, created=second)) for second in range(TRIES + 3) for text in TEXTS]
    fast, _ = await both(reads)
    assert fast.same == (TRIES + 3) * (len(TEXTS) - 1)


async def test_the_callers_head_and_tail_are_cut_from_the_chunk_learned_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rendered: list[shapes.Shape] = []
    render = openai_relay.OpenAIRelay._render

    def counted(self: openai_relay.OpenAIRelay, shape: shapes.Shape) -> bool:
        rendered.append(shape)
        return render(self, shape)

    monkeypatch.setattr(openai_relay.OpenAIRelay, "_render", counted)
    fast, _ = await both(stream(TEXTS))
    assert fast.same == len(TEXTS) - 1
    assert rendered == []
    # a text the event holds twice (here the caller's model name too) is rendered apart
    fast, _ = await both([read(chunk("public")), read(chunk("a")), read(chunk("b"))])
    assert fast.same == 2
    assert len(rendered) == 1
