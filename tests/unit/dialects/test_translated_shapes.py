"""The learned-shape path of the translators fed a chat stream (``FromChatChunks``): an
engine's text chunks, one event a read or several, are written as Messages or Responses
events without being read as chunks, byte for byte what reading them would write."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from parley.dialects.chat_to_messages import ChatToMessages
from parley.dialects.from_chat import FromChatChunks
from parley.domain.usage import UNBOUNDED, Usage
from tests.unit.dialects.test_responses import events, renderer
from tests.unit.dialects.test_stream_translators import LIMIT, chat_sse, chunk

WORDS = [f'wörd {index}\t"q" ' for index in range(12)]
THINKING = [f"step {index}. " for index in range(5)]
USAGE = {"prompt_tokens": 9, "completion_tokens": 17, "total_tokens": 26}


def engine_events() -> list[bytes]:
    """What an engine sends: the role, reasoning, then text, a token a chunk, with
    ``"usage": null`` on each as a stream that asked for usage has, then the usage."""
    chunks = [chunk({"role": "assistant", "content": ""}, usage=None)]
    chunks += [chunk({"reasoning_content": text}, usage=None) for text in THINKING]
    chunks += [chunk({"content": text}, usage=None) for text in WORDS]
    chunks += [chunk({}, "stop", usage=None)]
    chunks.append({**chunk({}), "choices": [], "usage": USAGE})
    whole = chat_sse(chunks)
    return [event + b"\n\n" for event in whole.split(b"\n\n") if event]


def messages() -> ChatToMessages:
    return ChatToMessages("public-model", "msg_1", 5, UNBOUNDED, LIMIT)


MAKERS: dict[str, Callable[[], FromChatChunks]] = {"messages": messages, "responses": renderer}


@pytest.fixture
def dict_way(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every chunk that goes the dict way (``_on_chunk``), recorded."""
    seen: list[Any] = []
    read = FromChatChunks._on_chunk

    def recorded(self: FromChatChunks, chunk: Any, out: list[bytes]) -> None:
        seen.append(chunk)
        read(self, chunk, out)

    monkeypatch.setattr(FromChatChunks, "_on_chunk", recorded)
    yield seen


def run(make: Callable[[], FromChatChunks], reads: list[bytes]) -> tuple[bytes, FromChatChunks]:
    translator = make()
    out = [piece for read in reads for piece in translator.feed(read)]
    out += translator.end()
    return b"".join(out), translator


@pytest.mark.parametrize("dialect", MAKERS)
@pytest.mark.parametrize("per_read", [1, 3])
def test_text_chunks_are_written_by_their_shape_as_reading_them_would(
    dialect: str, per_read: int, dict_way: list[Any]
) -> None:
    sent = engine_events()
    reads = [b"".join(sent[at : at + per_read]) for at in range(0, len(sent), per_read)]
    shaped, translator = run(MAKERS[dialect], reads)
    taken_by_shape = len(sent) - 1 - len(dict_way)  # [DONE] is no chunk
    dict_way.clear()
    read_whole, _ = run(MAKERS[dialect], [b"".join(sent)[:7], b"".join(sent)[7:]])
    assert len(dict_way) == len(sent) - 1  # a read that is not whole events: no shape
    assert shaped == read_whole
    # The role chunk and each field's first text teach; the stop and the usage go the
    # dict way: every other text chunk is taken by its shape.
    assert taken_by_shape == len(THINKING) + len(WORDS) - 2
    assert translator.done and translator.failure is None
    assert translator.delivered() == Usage(prompt_tokens=9, completion_tokens=17)
    written = events([shaped]) if dialect == "responses" else None
    assert written is None or written[-1]["type"] == "response.completed"


def test_a_shaped_literal_is_the_upstreams_and_counts_its_text() -> None:
    sent = engine_events()
    teacher = sent[7]  # the second text chunk: the shape is learned from the first
    escaped = teacher.replace(orjson.dumps(WORDS[1]), b'"\\u0041\\/b"')
    assert escaped != teacher
    out, translator = run(messages, [*sent[:7], escaped, *sent[8:]])
    assert b'"text":"\\u0041\\/b"}}' in out  # valid JSON, as the upstream escaped it
    found = [orjson.loads(line[6:]) for line in out.split(b"\n") if line.startswith(b"data: ")]
    deltas = [e["delta"] for e in found if e["type"] == "content_block_delta"]
    texts = [delta["text"] for delta in deltas if delta["type"] == "text_delta"]
    assert texts == [WORDS[0], "A/b", *WORDS[2:]]
    assert translator.delivered() == Usage(prompt_tokens=9, completion_tokens=17)


@pytest.mark.parametrize("dialect", MAKERS)
def test_a_literal_that_is_not_one_string_goes_the_dict_way(dialect: str) -> None:
    sent = engine_events()
    hidden = sent[9].replace(orjson.dumps(WORDS[3]), b'"a","b":"c"')
    out, _ = run(MAKERS[dialect], [*sent[:9], hidden, *sent[10:]])
    assert b'"b"' not in out.replace(b'"b":"c"', b"")  # nothing hid structure in the text
    whole, _ = run(MAKERS[dialect], [b"".join([*sent[:9], hidden, *sent[10:]])])
    assert out == whole


@pytest.mark.parametrize("dialect", MAKERS)
def test_a_stream_cut_after_shaped_events_fails_and_counts_them(dialect: str) -> None:
    sent = engine_events()
    _, translator = run(MAKERS[dialect], sent[:14])
    assert translator.failure is not None and not translator.done
    delivered = translator.delivered()
    assert delivered is not None and delivered.estimated
    assert delivered.completion_tokens >= 8  # every piece written counts


@pytest.mark.parametrize("per_read", [1, 3])
def test_the_open_blocks_texts_are_written_without_a_call_to_text(
    per_read: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shaped text for the open Messages block is written by ``FromChatChunks`` from
    ``_run`` (no ``_text`` call), byte for byte what the dict way writes; a tool call
    between two texts closes the block, so the next text opens one through ``_text``."""
    call = {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{}"}}
    chunks = [chunk({"content": text}, usage=None) for text in WORDS[:4]]
    chunks.append(chunk({"tool_calls": [call]}, usage=None))
    chunks += [chunk({"content": text}, usage=None) for text in WORDS[4:8]]
    chunks += [chunk({}, "stop", usage=None), {**chunk({}), "choices": [], "usage": USAGE}]
    whole = chat_sse(chunks)
    sent = [event + b"\n\n" for event in whole.split(b"\n\n") if event]
    reads = [b"".join(sent[at : at + per_read]) for at in range(0, len(sent), per_read)]
    dict_way, _ = run(messages, [whole[:7], whole[7:]])
    texts: list[str] = []
    write = ChatToMessages._text

    def recorded(self: ChatToMessages, field: str, literal: bytes, text: str, out: Any) -> None:
        texts.append(text)
        write(self, field, literal, text, out)

    monkeypatch.setattr(ChatToMessages, "_text", recorded)
    shaped, translator = run(messages, reads)
    assert shaped == dict_way
    assert shaped.count(b"event: content_block_start") == 3  # text, tool_use, text
    assert texts == [WORDS[0], WORDS[4]]  # each block's first text; the rest from ``_run``
    assert translator.delivered() == Usage(prompt_tokens=9, completion_tokens=17)
