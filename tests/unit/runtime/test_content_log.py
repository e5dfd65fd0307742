"""The content log: each policy keeps what it says (metadata: no text; redacted: masked;
full: as sent), text sealed and opened again, a stream's text assembled from each
dialect's events and cut at the cap; and the queue bounded: a full queue, no key or a
refusing database drops and counts, and ``finished`` never waits, even on a database
that hangs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import orjson
import pytest

from parley.credentials import CredentialBox, new_key
from parley.domain.content import ContentLogging, ContentPolicy, StoredContent
from parley.runtime.content_capture import ContentCapture, PreparedContent
from parley.runtime.content_document import document
from parley.runtime.content_log import ContentLog
from parley.settings import ContentSettings
from parley.store.base import StoreUnavailable

PROMPT = "my email is ada@example.org and my card 4111 1111 1111 1111"
REQUEST = orjson.dumps(
    {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": PROMPT},
        ],
    }
)
REPLY = orjson.dumps(
    {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "noted, ada@example.org"},
                "finish_reason": "stop",
            }
        ],
    }
)


class MemoryContents:
    """A ``ContentStore`` in memory that can refuse writes, or hang on them."""

    def __init__(self) -> None:
        self.rows: dict[str, StoredContent] = {}
        self.refuse = False
        self.hang = asyncio.Event()
        self.hanging = False

    async def save_contents(self, contents: Sequence[StoredContent]) -> int:
        if self.hanging:
            await self.hang.wait()
        if self.refuse:
            raise StoreUnavailable("the database is down")
        new = [c for c in contents if c.request_id not in self.rows]
        self.rows.update((c.request_id, c) for c in new)
        return len(new)

    async def find_content(self, request_id: str) -> StoredContent | None:
        return self.rows.get(request_id)

    async def purge_contents(self, most: int = 1000) -> int:
        return 0


def capture(policy: ContentPolicy, max_bytes: int = 4096) -> ContentCapture:
    return ContentCapture(ContentLogging(policy, 7), REQUEST, max_bytes)


def whole(policy: ContentPolicy) -> tuple[dict[str, Any], PreparedContent]:
    caught = capture(policy)
    caught.whole(REPLY, "application/json")
    return document(caught, endpoint="/v1/chat/completions", model="m", status=200)


def test_metadata_keeps_sizes_counts_model_and_finish_reason_but_no_text() -> None:
    body, prepared = whole("metadata")
    assert body == {
        "policy": "metadata",
        "endpoint": "/v1/chat/completions",
        "model": "m",
        "status": 200,
        "finish_reason": "stop",
        "request": {"bytes": len(REQUEST), "items": 2, "truncated": False},
        "reply": {"bytes": len(REPLY), "content_type": "application/json", "streamed": False},
    }
    assert "ada@" not in orjson.dumps(body).decode()
    assert (prepared.request_text, prepared.reply_text) == (None, None)


def test_redacted_masks_and_full_keeps_as_sent() -> None:
    redacted, prepared = whole("redacted")
    assert "ada@example.org" not in orjson.dumps(redacted).decode()
    assert "4111" not in redacted["request"]["text"]
    assert orjson.loads(redacted["request"]["text"])["messages"][1]["content"] == (
        "my email is [email] and my card [card]"
    )
    assert "noted, [email]" in redacted["reply"]["text"]
    assert prepared.request_text == redacted["request"]["text"]
    full, _ = whole("full")
    assert full["request"]["text"] == REQUEST.decode()
    assert full["reply"]["text"] == REPLY.decode()
    assert full["reply"]["truncated"] is False


def test_the_request_and_a_whole_reply_are_cut_at_the_cap() -> None:
    caught = capture("full", max_bytes=300)
    big = orjson.dumps({"messages": [{"role": "user", "content": "é" * 1000}]})
    caught = ContentCapture(ContentLogging("full"), big, 301)
    caught.whole(b'{"x": "' + b"y" * 1000 + b'"}', "application/json")
    body, _ = document(caught, endpoint="/v1/chat/completions", model="m", status=200)
    assert body["request"]["bytes"] == len(big) and body["request"]["truncated"] is True
    assert len(body["request"]["text"].encode()) <= 301  # a cut character is dropped
    assert body["request"]["items"] is None  # not kept whole: not counted
    assert body["reply"]["truncated"] is True and len(body["reply"]["text"]) == 301
    assert caught.request is not None and len(caught.request) == 301


def sse(*events: dict[str, Any]) -> list[bytes]:
    return [b"data: " + orjson.dumps(event) + b"\n\n" for event in events] + [b"data: [DONE]\n\n"]


def streamed(
    pieces: list[bytes], policy: ContentPolicy = "full", max_bytes: int = 4096
) -> dict[str, Any]:
    caught = capture(policy, max_bytes)
    caught.stream_opened("text/event-stream")
    for piece in pieces:
        caught.piece(piece)
    body, _ = document(caught, endpoint="/v1/x", model="m", status=200)
    return body


def chat_chunk(text: str | None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": text} if text is not None else {}
    return {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_a_streams_text_is_assembled_in_every_dialect() -> None:
    chat = streamed(sse(chat_chunk("Hel"), chat_chunk("lo"), chat_chunk(None, "length")))
    assert (chat["reply"]["text"], chat["finish_reason"]) == ("Hello", "length")
    assert chat["reply"]["streamed"] and chat["reply"]["truncated"] is False

    anthropic = streamed(
        sse(
            {"type": "message_start", "message": {"id": "m"}},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Bon"},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "jour"},
            },
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
        )
    )
    assert (anthropic["reply"]["text"], anthropic["finish_reason"]) == ("Bonjour", "end_turn")

    responses = streamed(
        sse(
            {"type": "response.output_text.delta", "delta": "Hi "},
            {"type": "response.output_text.delta", "delta": "there"},
            {
                "type": "response.completed",
                "response": {"object": "response", "status": "completed"},
            },
        )
    )
    assert (responses["reply"]["text"], responses["finish_reason"]) == ("Hi there", "completed")


def test_a_long_streams_text_is_cut_and_its_end_still_read() -> None:
    pieces = sse(*[chat_chunk("word ") for _ in range(400)], chat_chunk(None, "stop"))
    body = streamed(pieces, max_bytes=300)
    assert body["reply"]["truncated"] is True
    assert body["reply"]["text"].startswith("word word") and body["reply"]["text"].endswith("…")
    assert len(body["reply"]["text"].encode()) <= 300 + len("…".encode())
    assert body["finish_reason"] == "stop"  # from the tail, past what was kept
    assert body["reply"]["bytes"] == sum(len(p) for p in pieces)


def test_a_binary_reply_keeps_its_size_not_its_bytes() -> None:
    caught = capture("full")
    caught.whole(b"\xff\xfbaudio", "audio/mpeg")
    body, prepared = document(caught, endpoint="/v1/audio/speech", model="tts", status=200)
    assert body["reply"] == {
        "bytes": 7,
        "content_type": "audio/mpeg",
        "streamed": False,
        "text": None,
        "truncated": False,
    }
    assert prepared.reply_text is None


def log_of(store: MemoryContents, *, keys: bool = True, **settings: Any) -> ContentLog:
    box = CredentialBox([new_key()] if keys else [])
    return ContentLog(store, box, ContentSettings(**{"flush_seconds": 0.01, **settings}))


def finish(log: ContentLog, caught: ContentCapture, request_id: str) -> None:
    log.finished(
        caught,
        request_id=request_id,
        group_id=3,
        endpoint="/v1/chat/completions",
        model="m",
        status=200,
    )


async def test_text_is_sealed_at_rest_and_opened_for_the_admin() -> None:
    store = MemoryContents()
    log = log_of(store)
    told: list[PreparedContent | None] = []
    full, meta = capture("full"), capture("metadata")
    full.whole(REPLY, "application/json")
    full.listeners.append(told.append)
    finish(log, full, "req_full")
    finish(log, meta, "req_meta")
    await log.flush()

    sealed = store.rows["req_full"]
    assert sealed.sealed and sealed.policy == "full" and sealed.group_id == 3
    assert "ada" not in sealed.body and "messages" not in sealed.body
    assert (sealed.expires_at - sealed.created_at).days == 7
    opened = log.opened(sealed)
    assert opened["request"]["text"] == REQUEST.decode()  # type: ignore[index]
    plain = store.rows["req_meta"]
    assert not plain.sealed and orjson.loads(plain.body)["request"]["items"] == 2
    assert told and told[0] is not None and told[0].reply_text == REPLY.decode()
    assert log.written == 2


async def test_a_full_queue_drops_and_counts_without_waiting_on_a_hung_database() -> None:
    store = MemoryContents()
    store.hanging = True
    log = log_of(store, queue_size=3, batch_size=1)
    log.start()
    try:
        finish(log, capture("full"), "req_0")
        await asyncio.sleep(0.05)  # the writer took it, and hangs on the database
        assert log.backlog == 1
        told: list[PreparedContent | None] = []
        started = time.perf_counter()
        for n in range(1, 50):
            caught = capture("full")
            caught.listeners.append(told.append)
            finish(log, caught, f"req_{n}")
        assert time.perf_counter() - started < 0.05  # never waited
        assert log.backlog == 3  # the batch being written still counts
        assert log.dropped["queue_full"] == 47
        assert told.count(None) == 47  # a dropped capture's listeners are told at once
    finally:
        store.hang.set()
        await log.close(2)
    assert set(store.rows) == {"req_0", "req_1", "req_2"}


async def test_no_key_and_a_refusing_database_drop_and_count() -> None:
    store = MemoryContents()
    log = log_of(store, keys=False)
    finish(log, capture("redacted"), "req_text")
    finish(log, capture("metadata"), "req_meta")  # holds no text: needs no key
    assert log.dropped["no_key"] == 1
    await log.flush()
    assert set(store.rows) == {"req_meta"}
    assert not log.can_seal

    store.refuse = True
    finish(log, capture("metadata"), "req_lost")
    await log.flush()
    assert log.dropped["write_failed"] == 1 and "req_lost" not in store.rows


@pytest.mark.parametrize("policy", ["metadata", "redacted", "full"])
def test_the_capture_copies_no_more_than_the_cap(policy: ContentPolicy) -> None:
    huge = b"x" * 1_000_000
    caught = ContentCapture(ContentLogging(policy), huge, 1000)
    caught.stream_opened("text/event-stream")
    for _ in range(100):
        caught.piece(huge[:10_000])
    assert caught.request is not None and len(caught.request) == 1000
    assert len(caught.reply) == 4000  # the stream's own bytes: 4 x the cap
    assert len(caught.tail) == 4 and caught.reply_bytes == 1_000_000


def test_a_binary_stream_is_counted_and_none_of_it_kept() -> None:
    caught = capture("full")
    caught.stream_opened("audio/mpeg")
    for _ in range(10):
        caught.piece(b"\xff" * 1000)
    assert (len(caught.reply), len(caught.tail), caught.reply_bytes) == (0, 0, 10_000)
    body, _ = document(caught, endpoint="/v1/audio/speech", model="tts", status=200)
    assert body["reply"]["text"] is None and body["reply"]["bytes"] == 10_000


async def test_what_a_hung_database_did_not_take_by_shutdown_is_dropped_and_counted() -> None:
    store = MemoryContents()
    store.hanging = True
    log = log_of(store, batch_size=2)
    log.start()
    told: list[PreparedContent | None] = []
    for n in range(5):
        caught = capture("metadata")
        caught.listeners.append(told.append)
        finish(log, caught, f"req_{n}")
    await asyncio.sleep(0.05)
    await log.close(0.1)  # the database never answers
    assert log.dropped["shutdown"] == 5 and log.backlog == 0
    assert store.rows == {}
    assert len(told) == 5  # every listener told once (a traced span ends)
