"""The reading half of a translator fed an OpenAI chat stream, sans-IO.

``FromChatChunks`` is what ``ChatToMessages`` and ``ChatToResponses`` share: it reads
the ``data:`` events of ``chat.completion.chunk`` objects by ``ChunkParsing``'s rules
(``[DONE]`` ends the stream, a blank event is skipped, a malformed one or an ``error``
payload is the ``failure``, an event past the size bound fails the stream after what
came before it, and so does a body that ends before ``[DONE]``), keeps the upstream's
usage and the stop, and counts what was delivered for the estimate. A subclass writes
its dialect's events: ``_start`` once, ``_delta`` for each choice's delta, ``_text`` for
a piece of text (given as the JSON string literal it is written with, and as text),
``_finish`` at the end.

Most of a chat stream's events are text chunks of one **learned shape**
(``dialects/chunk_shapes.py``), as for the OpenAI relay: an event whose data is the
shape's bytes around one JSON string literal is not parsed as a chunk at all; its literal
(checked by ``orjson`` to be exactly one string) goes to ``_text`` as it came, and the
subclass writes it between bytes it rendered once. While a subclass's open block takes
one field's text between fixed bytes, it names them in ``_run``, and such a text is
written here without a call to ``_text`` (byte for byte what ``_text`` writes). Everything
else goes the dict way, and a stream stops trying to learn after ``TRIES`` events in a row
the shape did not take.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import orjson

from parley.dialects.canonical import Stop
from parley.dialects.chunk_reader import ChunkParsing
from parley.dialects.chunk_shapes import Shape, learn, literal_between
from parley.dialects.openai_chat_reply import FINISH_TO_STOP, read_usage
from parley.dialects.openai_relay import TRIES
from parley.dialects.translator import delivered_estimate
from parley.domain.usage import Allowance, Usage, with_estimate
from parley.domain.wire import JSON


class FromChatChunks(ChunkParsing, ABC):
    """``ChunkTranslator[bytes]``'s common part: chat chunks in, a subclass's events out.

    ``done`` is set when the upstream's ``[DONE]`` is read, and the closing events are
    written in the same ``feed``."""

    __slots__ = (
        "_allowance",
        "_characters",
        "_pieces",
        "_prompt_estimate",
        "_reported",
        "_run",
        "_shape",
        "_started",
        "_stop",
        "_tries",
    )

    def __init__(self, prompt_estimate: int, allowance: Allowance, max_event_bytes: int) -> None:
        ChunkParsing.__init__(self, max_event_bytes)
        self._prompt_estimate = prompt_estimate
        self._allowance = allowance
        """What the call may consume (``Admission.allowance``): the usage the stream's
        last events say is capped there, as its bill is."""
        self._started = False
        self._stop: Stop | None = None
        """The last ``finish_reason`` read, as a canonical stop."""
        self._reported: Usage | None = None
        """The upstream's usage, when a chunk carried it."""
        self._characters = 0
        self._pieces = 0
        self._shape: Shape | None = None
        """The upstream's learned text chunk, while every read is whole events."""
        self._tries = TRIES
        """Events the stream may still try to learn a shape from; set back whenever the
        shape takes one."""
        self._run: tuple[str, bytes, bytes] | None = None
        """The delta field whose text the open block takes as a text event of its own,
        and the bytes before and after the text's literal in that event: set by the
        subclass while they hold (``None``: each text goes to ``_text``)."""

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        shape = self._shape
        # The learned shape's read: ``data: H"...."T`` and the blank line, nothing else
        # (no shape is kept once the parser holds part of an event, or the stream ended).
        # Written out here and in ``_payloads``, as in ``OpenAIRelay``: this runs once per
        # token, where a method returning the literal and its text costs more than the
        # repetition.
        if (
            shape is not None
            and len(data) <= self._limit
            and (literal := literal_between(data, shape.head, shape.tail)) is not None
            and 10 not in literal  # a line end (as a number: cheaper): several events
        ):
            try:
                text = orjson.loads(literal)
            except orjson.JSONDecodeError:
                text = None
            if type(text) is str:
                self._tries = TRIES
                if text:
                    run = self._run
                    if run is not None and run[0] == shape.field:  # ``_text``, written out
                        out.append(run[1] + literal + run[2])
                        self._characters += len(text)
                        self._pieces += 1
                    else:
                        self._text(shape.field, literal, text, out)
                return out
        if self._over():
            return out
        parser = self._parser
        payloads = parser.whole_data(data)
        if payloads is None:
            self._shape = None
            for chunk in self._parsed(data, parser):
                self._on_chunk(chunk, out)
        else:
            self._payloads(payloads, out)
        if self.done:  # the upstream's ``[DONE]``, read just now
            self._finish(out)
        if self._over():
            self._shape = None
        return out

    def _over(self) -> bool:
        """Whether the stream is done or failed (a method, as a read may set either)."""
        return self.done or self.failure is not None

    def _payloads(self, payloads: list[bytes], out: list[bytes]) -> None:
        """Whole events' data: each the shape takes written as its text, any other read
        as a chunk (and learned from, while the stream may still try)."""
        for payload in payloads:
            shape = self._shape
            if (
                shape is not None
                and (literal := literal_between(payload, shape.opening, shape.closing)) is not None
            ):
                try:
                    text = orjson.loads(literal)
                except orjson.JSONDecodeError:
                    text = None
                if type(text) is str:
                    self._tries = TRIES
                    if text:
                        run = self._run
                        if run is not None and run[0] == shape.field:  # as in ``feed``
                            out.append(run[1] + literal + run[2])
                            self._characters += len(text)
                            self._pieces += 1
                        else:
                            self._text(shape.field, literal, text, out)
                    continue
            chunks = self._whole([payload])
            if chunks:
                if self._tries:
                    self._tries -= 1
                    self._shape = learn(payload, chunks[0]) or self._shape
                self._on_chunk(chunks[0], out)
            if self.done or self.failure is not None:
                return

    def feed_chunks(self, chunks: Sequence[JSON]) -> list[bytes]:
        out: list[bytes] = []
        for chunk in chunks:
            if self.done or self.failure is not None:
                break
            self._on_chunk(chunk, out)
        return out

    def end(self) -> list[bytes]:
        self._ended()  # the upstream's body ended: ``TRUNCATED`` unless ``[DONE]`` came
        return []

    def finish(self) -> list[bytes]:
        if self.done or self.failure is not None:
            return []
        out: list[bytes] = []
        self._finish(out)
        return out

    def delivered(self) -> Usage | None:
        estimate = delivered_estimate(self._prompt_estimate, self._characters, self._pieces)
        return with_estimate(self._reported, estimate)

    def billed(self) -> Usage:
        """What the caller is told it used: ``delivered`` capped at the allowance, as the
        meter bills it (the prompt's estimate when nothing was delivered)."""
        usage = self.delivered() or Usage(prompt_tokens=self._prompt_estimate)
        return self._allowance.cap(usage)

    def _on_chunk(self, chunk: JSON, out: list[bytes]) -> None:
        if not self._started:
            self._start(out)
        usage = read_usage(chunk.get("usage"))
        if usage is not None:
            self._reported = usage
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            self._delta(delta, out)
        finish = choice.get("finish_reason")
        if isinstance(finish, str):
            self._stop = FINISH_TO_STOP.get(finish, "end")

    @abstractmethod
    def _start(self, out: list[bytes]) -> None:
        """The stream's opening events; sets ``_started``."""

    @abstractmethod
    def _delta(self, delta: JSON, out: list[bytes]) -> None:
        """One chunk's ``delta``, written as the dialect's events."""

    @abstractmethod
    def _text(self, field: str, literal: bytes, text: str, out: list[bytes]) -> None:
        """A piece of text (not empty) in the delta ``field`` (``content`` or
        ``reasoning_content``): ``literal`` is ``text`` as a JSON string, to be written
        as it is."""

    @abstractmethod
    def _finish(self, out: list[bytes]) -> None:
        """The stream's closing events; sets ``done``."""
