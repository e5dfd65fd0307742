"""An OpenAI-compatible upstream's stream relayed to an OpenAI caller, sans-IO.

``OpenAIRelay`` is the translator of the OpenAI chat and completions jobs, fed by
``providers/translated.py`` like every other: the upstream's bytes in, the caller's
``data:`` events out. Both ends speak one dialect, but Parley still rewrites each chunk
(the caller's model name, the id with the caller's prefix, the usage chunk only when
the caller asked for it) and counts what it produced (``StreamTally``), so every event
is parsed (``ChunkParsing``, the reading ``ChunkReader`` does) and written again, except one kind.

Most of a chat stream's events are relayed **by their learned shape**
(``dialects/chunk_shapes.py``): from an event parsed the usual way whose chunk is one
choice with one text field, the relay learns the upstream's bytes around the text's
string literal; a later event whose data is exactly those bytes around one string
literal (a read of that one event, or one event of a read of whole events, which is
split first) is written as the caller's head, the upstream's literal and the caller's
tail (rendered once the dict way, with a marker for the text, and again after any chunk
that went the dict way, which may change the id), and counted as ``observe`` would
count its chunk. Everything else (partial lines, errors, usage, a head or tail that
changed) goes the dict way; a changed shape is learned again, and a stream stops trying
after ``TRIES`` events in a row the shape did not take. Completion streams are relayed
without shapes.

Once the upstream's stream is complete (``[DONE]``), ``closing`` is what ends the
caller's: Parley's own usage chunk when the caller asked for usage and the upstream sent
none, then ``data: [DONE]``. A body that ends before ``[DONE]`` is the stream's
``failure`` (``TRUNCATED``), which the job tells as its error chunk: Parley never makes
up the ``[DONE]`` an upstream did not send. ``feed`` runs once per upstream read on the
hottest path Parley has: keep it lean.

``StreamTally`` is the stream's bill: what it produced and the usage its upstream
reported, from which the call is metered (the upstream's usage chunk when one came, else
Parley's estimate). The dict way counts each chunk with ``observe``; the learned shape's
events are counted where they are written, into the same tally, as ``observe`` would.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Any

import orjson

from parley.dialects.chunk_reader import ChunkParsing
from parley.dialects.chunk_shapes import QUOTE, Shape, learn, literal_between
from parley.dialects.openai_chat_reply import read_usage, usage_fields
from parley.domain.usage import Allowance, Usage, with_estimate
from parley.domain.wire import JSON

DONE = b"data: [DONE]\n\n"
TRIES = 4
"""Events in a row the shape did not take that a stream may learn from (the role chunk
and the first text chunk take two), before it stops trying: an upstream whose every
chunk differs (OpenAI's ``obfuscation``) or that sends no text stops paying for it. Each
event the shape takes sets it back, so a shape that changes now and then (a new id,
llama.cpp's ``created`` each second) is learned again."""
_MARK_LITERAL = orjson.dumps("\x00parley-shape-text\x00")
"""A text no chunk holds, as ``orjson`` writes it: marks where a shape's text goes."""


class OpenAIRelay(ChunkParsing):
    """``ChunkTranslator[bytes]``: an OpenAI stream in, the caller's OpenAI events out.

    ``chunk_object`` is the stream's chunk ``object`` (``chat.completion.chunk``,
    ``text_completion``), for a usage chunk made before the upstream sent any chunk;
    ``shapes`` turns the learned-shape path on (chat streams)."""

    __slots__ = (
        "_allowance",
        "_head",
        "_id",
        "_include_usage",
        "_last",
        "_model",
        "_object",
        "_prefix",
        "_rendered",
        "_shape",
        "_tail",
        "_tally",
        "_tries",
        "_upstream_id",
        "shaped",
    )

    def __init__(
        self,
        model: str,
        id_prefix: str,
        chunk_object: str,
        *,
        include_usage: bool,
        prompt_estimate: int,
        allowance: Allowance,
        max_event_bytes: int,
        shapes: bool,
    ) -> None:
        ChunkParsing.__init__(self, max_event_bytes)
        self._model = model
        self._prefix = id_prefix
        self._object = chunk_object
        self._include_usage = include_usage
        self._tally = StreamTally(prompt_estimate)
        self._allowance = allowance
        """What the call may consume (``Admission.allowance``): a usage chunk the caller
        gets says what is billed, capped there."""
        self._upstream_id: object = None
        self._id = ""
        self._last: JSON = {}
        self._shape: Shape | None = None
        """The upstream's learned shape, while it holds."""
        self._tries = TRIES if shapes else 0
        """Events the stream may still try to learn a shape from (none without
        ``shapes``); set back whenever the shape takes one."""
        self._rendered: Shape | None = None
        """The shape ``_head`` and ``_tail`` are rendered for; dropped by any chunk that
        goes the dict way (it may change the id the next one gets)."""
        self._head = self._tail = b""
        self.shaped = 0
        """Events relayed by their shape so far (what the tests read to see the path taken)."""

    @property
    def tally(self) -> StreamTally:
        """What the caller was given so far, and the usage the upstream reported."""
        return self._tally

    def feed(self, data: bytes) -> list[bytes]:
        shape = self._shape
        # The learned shape's read: ``data: H"...."T`` and the blank line, nothing else.
        # Only the literal between H and T is parsed; if it is not exactly one quoted JSON
        # string, the read goes the way below and is judged by its rules. The parser is
        # left as ``whole_data`` would leave it (a shape is kept only while every read is
        # whole events), so it is not called. (No shape is kept once the stream is done
        # or failed: ``_relayed`` drops it.) ``literal_between``, written out.
        if shape is not None and len(data) <= self._limit:
            rest = data.removeprefix(shape.head)
            literal = rest.removesuffix(shape.tail) if rest is not data else rest
            # A line end (10) in the literal is a read of several events (no JSON string
            # holds one): they are split below, not parsed here to fail. Bytes are looked
            # for as numbers (34 is the quote): ``b"\n" in`` first fails as a number.
            if (
                literal is not rest
                and literal
                and literal[0] == QUOTE
                and literal[-1] == QUOTE
                and 10 not in literal
            ):
                try:
                    text = orjson.loads(literal)
                except orjson.JSONDecodeError:
                    text = None
                if type(text) is str:
                    self._tries = TRIES
                    if shape is not self._rendered:
                        return [self._same(shape, literal, text)]
                    self.shaped += 1  # ``_same``, written out for a rendered shape
                    if text:
                        tally = self._tally
                        tally.characters += len(text)
                        tally.pieces += 1
                    return [self._head + literal + self._tail]
        if self.done or self.failure is not None:
            return []
        parser = self._parser
        payloads = parser.whole_data(data)
        if payloads is None:
            self._shape = None
            chunks = self._parsed(data, parser)
        elif len(payloads) > 1 and (shape is not None or self._tries):
            return self._several(payloads)
        else:
            chunks = self._whole(payloads)
            if self._tries and len(payloads) == 1 and chunks:
                return self._taught(payloads[0], chunks)
        return self._relayed(chunks)

    def _several(self, payloads: list[bytes]) -> list[bytes]:
        """A read of several whole events (what an upstream's separate writes become when
        they arrive faster than they are read), relayed in order as one piece: each
        event's data the learned shape takes as a one-event read would be, any other the
        dict way, learned from while the stream may still try. Nothing after the event
        that ended the stream (``[DONE]``, an error).

        The shape's events are written out here, with the shape and the caller's head and
        tail held in locals and the counts summed once a run (this runs once per token:
        keep it lean); what is not the common case goes through ``_same``."""
        out: list[bytes] = []
        loads, malformed, tally = orjson.loads, orjson.JSONDecodeError, self._tally
        shape = self._shape
        rendered = shape is not None and shape is self._rendered
        head, tail = self._head, self._tail
        characters = pieces = run = 0
        for index, payload in enumerate(payloads):
            if (
                shape is not None
                and (literal := literal_between(payload, shape.opening, shape.closing)) is not None
            ):
                try:
                    text = loads(literal)
                except malformed:
                    text = None
                if type(text) is str:
                    if rendered:
                        run += 1
                        out += (head, literal, tail)
                        if text:
                            characters += len(text)
                            pieces += 1
                    else:  # the first since the shape was learned or a chunk the dict way
                        self._tries = TRIES
                        out.append(self._same(shape, literal, text))
                        rendered = shape is self._rendered
                        head, tail = self._head, self._tail
                    continue
            if run:  # counted before the dict way reads a usage chunk against the tally
                self._tries = TRIES
                self.shaped += run
                tally.characters += characters
                tally.pieces += pieces
                characters = pieces = run = 0
            if shape is None and not self._tries:  # the rest go the dict way, together
                out += self._relayed(self._whole(payloads[index:]))
                break
            chunks = self._whole([payload])
            out += (
                self._taught(payload, chunks) if self._tries and chunks else self._relayed(chunks)
            )
            if self.done or self.failure is not None:
                break
            shape = self._shape
            rendered = shape is not None and shape is self._rendered
            head, tail = self._head, self._tail
        if run:
            self._tries = TRIES
            self.shaped += run
        tally.characters += characters
        tally.pieces += pieces
        return [b"".join(out)] if out else []

    def feed_chunks(self, chunks: Sequence[JSON]) -> list[bytes]:
        """Chunks another reader made (an upstream of another dialect: ``Chained``)."""
        if self.done or self.failure is not None:
            return []
        return self._relayed(list(chunks))

    def end(self) -> list[bytes]:
        self._ended()  # checked once, at the end: never on the per-event path
        return []  # what closes the caller's stream is the job's to write: ``closing``

    def finish(self) -> list[bytes]:
        return []  # another reader saw the upstream's end: ``closing`` ends the caller's

    def delivered(self) -> Usage | None:
        tally = self._tally
        return tally.usage() if tally.produced else None

    def _relayed(self, chunks: list[JSON]) -> list[bytes]:
        """The caller's events for ``chunks`` (none when nothing is owed)."""
        if self.done or self.failure is not None:
            self._shape = None  # nothing is relayed after the stream's end
        events = self._events(chunks, self._tally) if chunks else b""
        return [events] if events else []

    def _taught(self, payload: bytes, chunks: list[JSON]) -> list[bytes]:
        """``_relayed`` for the chunk of one event's data, learned from first (``_learn``).
        When it taught a shape, the caller's head and tail are cut from the chunk's own
        bytes, around its text: they are what ``_render`` would make (the shape's chunk
        is the chunk with its text, written the dict way for the stream's state now), so
        the shape's next event is not rendered again."""
        shape = self._learn(payload, chunks[0])
        relayed = self._relayed(chunks)
        if shape is not None and self._shape is shape and relayed:
            literal = payload[shape.at : len(payload) - shape.back]
            events = relayed[0]
            if events.count(literal) == 1:
                self._head, _, self._tail = events.partition(literal)
                self._rendered = shape
        return relayed

    def _learn(self, payload: bytes, chunk: JSON) -> Shape | None:
        """Learn the shape of one event's chunk (a one-event read's, or one of a read of
        several), which the learned shape (if any) did not take: the first text chunk, or
        one whose head or tail changed (a new id, a per-second ``created``). The shape
        learned, if any."""
        self._tries -= 1
        shape = learn(payload, chunk)
        if shape is not None:
            self._shape = shape
        return shape

    def _events(self, chunks: Sequence[JSON], tally: StreamTally) -> bytes:
        """The chunks, counted by ``tally``, as the caller's SSE bytes (empty when nothing
        is owed)."""
        self._rendered = None  # a chunk the dict way may change the id the next one gets
        shaped: list[bytes] = []
        observe, dumps, model = tally.observe, orjson.dumps, self._model
        for chunk in chunks:
            observe(chunk)
            if "usage" in chunk:
                if not self._include_usage:
                    if not chunk.get("choices"):
                        continue
                    del chunk["usage"]
                elif chunk["usage"] and tally.reported is not None:
                    self._billed(chunk, tally)
            chunk["model"] = model
            upstream = chunk.get("id")
            if upstream != self._upstream_id or not self._id:
                self._upstream_id, self._id = upstream, self._caller_id(upstream)
            chunk["id"] = self._id
            shaped.append(dumps(chunk))
        if not shaped:
            return b""
        self._last = chunk
        events = shaped[0] if len(shaped) == 1 else b"\n\ndata: ".join(shaped)
        return b"".join((b"data: ", events, b"\n\n"))

    def _billed(self, chunk: JSON, tally: StreamTally) -> None:
        """The upstream's usage chunk saying what is billed: a report past the allowance
        is not believed (``Allowance.cap``), and the caller reads the bill's counts over
        it, as a whole reply's ``usage`` does. A report within it (the report is what the
        check reads) is left as it came, with no usage built."""
        allowance, reported = self._allowance, tally.reported
        if reported is None or allowance.cap(reported) is reported:
            return
        usage = tally.usage()
        billed = allowance.cap(usage)
        if billed is not usage:
            reported = chunk["usage"]
            chunk["usage"] = {
                **(reported if type(reported) is dict else {}),
                **usage_fields(billed),
            }

    def _same(self, shape: Shape, literal: bytes, text: str) -> bytes:
        """A read relayed by its shape: counted as ``observe`` counts its chunk (one
        choice, a delta holding only its text), written as the caller's head, the
        upstream's literal and the caller's tail: what the dict way would write, byte for
        byte when the upstream escapes as ``orjson`` does."""
        self.shaped += 1
        if shape is not self._rendered and not self._render(shape):
            return self._events([shape.chunk(literal)], self._tally)  # the dict way
        if text:
            tally = self._tally
            tally.characters += len(text)
            tally.pieces += 1
        return self._head + literal + self._tail

    def _render(self, shape: Shape) -> bool:
        """Render ``shape``'s chunk the dict way (its id and model, for the stream's state
        now), with a marker for its text, and split the event there."""
        rendered = self._events([shape.chunk(_MARK_LITERAL)], StreamTally(0))
        if rendered.count(_MARK_LITERAL) != 1:
            return False
        self._head, _, self._tail = rendered.partition(_MARK_LITERAL)
        self._rendered = shape
        return True

    def closing(self) -> bytes:
        """What ends a complete stream for the caller: ``[DONE]``, after Parley's own
        usage chunk if the caller asked for usage and the upstream sent none (the usage
        record is then marked estimated). The job writes it as the reply's last bytes
        (with the reply's end, in one write), not with the upstream's ``[DONE]`` read."""
        tally = self._tally
        if not self._include_usage or tally.reported is not None:
            return DONE
        chunk = {
            "id": self._id or self._caller_id(None),
            "object": self._last.get("object", self._object),
            "created": self._last.get("created", int(time.time())),
            "model": self._model,
            "choices": [],
            "usage": usage_fields(self._allowance.cap(tally.usage())),
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n" + DONE

    def _caller_id(self, upstream: object) -> str:
        """The upstream's id with the caller's prefix; one made up when it sent none."""
        if isinstance(upstream, str) and upstream.startswith(self._prefix):
            return upstream
        if isinstance(upstream, str) and upstream:
            return self._prefix + upstream
        return self._id or self._prefix + secrets.token_hex(12)


class StreamTally:
    """What a stream has produced so far, and the usage the upstream reported."""

    __slots__ = ("characters", "pieces", "prompt_estimate", "reported")

    def __init__(self, prompt_estimate: int) -> None:
        self.prompt_estimate = prompt_estimate
        self.characters = 0
        self.pieces = 0
        self.reported: Usage | None = None

    def observe(self, chunk: dict[str, Any]) -> None:
        """Count what the chunk produced (this runs once per token: keep it lean)."""
        if "usage" in chunk:
            usage = chunk["usage"]
            self._report(usage)
            if usage and not chunk.get("choices"):
                return  # the usage chunk: nothing produced (and no exception to raise below)
        # Nearly every chunk is one choice whose delta holds only its text: read it by
        # subscripts (a ``get`` is a method call, several times the cost here), any other
        # shape raising its way to ``_count``, which reads every choice by the rules.
        try:
            (choice,) = chunk["choices"]
            delta = choice["delta"]
            text = delta["content"]
        except (KeyError, TypeError, ValueError):
            self._count(chunk)
            return
        if type(text) is not str or len(delta) != 1:
            self._count(chunk)
        elif text:
            self.characters += len(text)
            self.pieces += 1

    def _count(self, chunk: dict[str, Any]) -> None:
        choices = chunk.get("choices")
        if choices and type(choices) is list:
            for choice in choices:
                produced = _choice_text(choice) if type(choice) is dict else 0
                if produced:
                    self.characters += produced
                    self.pieces += 1

    def _report(self, usage: Any) -> None:
        if usage:  # streams that asked for usage carry ``"usage": null`` on every chunk
            self.reported = read_usage(usage, source="the upstream's stream") or self.reported

    def usage(self) -> Usage:
        """The upstream's report with Parley's estimate (``with_estimate``), or the
        estimate when it reported nothing valid."""
        completion = max(self.pieces, (self.characters + 3) // 4)
        estimate = Usage(
            prompt_tokens=self.prompt_estimate, completion_tokens=completion, estimated=True
        )
        return with_estimate(self.reported, estimate)

    @property
    def produced(self) -> bool:
        return self.pieces > 0 or self.reported is not None


def _choice_text(choice: dict[str, Any]) -> int:
    """Characters a choice produced: content, reasoning and tool-call text."""
    delta = choice.get("delta")
    if type(delta) is not dict:
        text = choice.get("text")  # a classic completion's choice
        return len(text) if type(text) is str else 0
    content = delta.get("content")
    size = len(content) if type(content) is str else 0
    if "reasoning_content" in delta:
        reasoning = delta["reasoning_content"]
        if type(reasoning) is str:
            size += len(reasoning)
    if "tool_calls" in delta:
        calls = delta["tool_calls"]
        if calls and type(calls) is list:
            for call in calls:
                function = call.get("function") if type(call) is dict else None
                if type(function) is dict:
                    size += len(function.get("arguments") or "") + len(function.get("name") or "")
    return size
