"""Server-Sent Events: an incremental parser for upstream streams, and the encoder.

The parser follows the WHATWG event-stream rules: lines end with LF, CRLF or a lone CR;
``data`` fields of one event are joined with LF; a line starting with ``:`` is a comment;
an empty line dispatches the event (only if it had ``data``). Bytes are buffered until a
whole line has arrived, so a chunk may end anywhere, even inside a UTF-8 character: a
line end is ASCII and never falls inside one.

An event may be bounded (``max_event_bytes``): the parser raises ``EventTooLarge`` as
soon as the pending line or the event's data pass the bound, so an upstream sending a
line without end cannot make it buffer more than that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

_BOM = b"\xef\xbb\xbf"


@dataclass(slots=True)
class SseEvent:
    """One dispatched event: its ``event`` name (``None`` when not given) and its data.

    Not frozen: a frozen dataclass costs three times as much to build, and a stream makes
    one per token. Treat it as read-only.
    """

    data: str
    event: str | None = None
    id: str | None = None


class EventTooLarge(Exception):
    """An event (or one line) passed the parser's bound. ``events`` are those the same
    chunk completed before it, still owed to the reader."""

    def __init__(self, limit: int, events: list[SseEvent]) -> None:
        super().__init__(f"a streamed event is larger than {limit} bytes")
        self.events = events


class SseParser:
    """Feed it the body's chunks as they arrive; it returns the events each one completed."""

    __slots__ = (
        "_data",
        "_event",
        "_event_bytes",
        "_last_id",
        "_limit",
        "_partial",
        "_partial_bytes",
        "_skip_lf",
        "_started",
        "retry",
    )

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._limit = max_event_bytes if max_event_bytes is not None else 1 << 62
        self._partial: list[bytes] = []
        self._partial_bytes = 0
        self._event_bytes = 0
        """Bytes of the current event's lines so far (its pending line not counted)."""
        self._skip_lf = False
        self._started = False
        self._data: list[str] = []
        self._event: str | None = None
        self._last_id: str | None = None
        self.retry: int | None = None
        """The reconnection time (milliseconds) the stream last asked for, if any."""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        simple = self._simple_events(chunk)
        if simple is not None:
            return simple
        chunk = self._normalise(chunk)
        if 10 not in chunk:  # LF
            if chunk:
                self._partial.append(chunk)
                self._partial_bytes += len(chunk)
                self._bound([])
            return []
        if self._partial:
            self._partial.append(chunk)
            chunk = b"".join(self._partial)
            self._partial.clear()
            self._partial_bytes = 0
        lines = chunk.split(b"\n")
        rest = lines.pop()
        events: list[SseEvent] = []
        for line in lines:
            if line:
                self._event_bytes += len(line)
                self._bound(events)
                self._field(line)
            elif self._data:
                events.append(self._dispatch())
            else:
                self._event = None
                self._event_bytes = 0
        if rest:
            self._partial.append(rest)
            self._partial_bytes = len(rest)
            self._bound(events)
        return events

    def _bound(self, events: list[SseEvent]) -> None:
        """Past the bound, stop: raise, with the events completed before."""
        if self._event_bytes + self._partial_bytes > self._limit:
            raise EventTooLarge(self._limit, events)

    def _simple_events(self, chunk: bytes) -> list[SseEvent] | None:
        """``whole_data``'s events as ``SseEvent``s; ``None`` when it has none."""
        blocks = self.whole_data(chunk)
        if blocks is None:
            return None
        last_id = self._last_id
        return [SseEvent(block.decode("utf-8", "replace"), None, last_id) for block in blocks]

    def whole_data(self, chunk: bytes) -> list[bytes] | None:
        """The fast path for what nearly every engine sends: whole ``data: ...`` events,
        one line each, ending with the chunk. Their data, as bytes (such events have no
        name, and the id is the last one seen). ``None`` for anything else (a partial
        line, a comment, other fields, multi-line data, CR line ends): the chunk was not
        taken, and goes to ``feed``, which parses it in full.
        """
        if (
            self._partial
            or len(chunk) > self._limit
            or self._data
            or self._event is not None
            or self._skip_lf
        ):
            return None
        # Each event is "data: " and a line: the chunk holds no line end but the two after
        # each event ("data: " inside a value only sends us the slow way). Checked with
        # partition, slices and `in` with a byte as a number (13 is CR, 10 LF), which cost
        # less than a bytes method that parses its arguments or `in` with a bytes operand
        # (docs/performance.md, Speed habits), and this runs once per read. One event (how
        # an engine sends each token) is two partitions: the line, then nothing but the
        # blank line's LF; "data: ", with nothing before it, and the data.
        line, _, rest = chunk.partition(b"\n")
        if rest == b"\n":
            before, field, value = line.partition(b"data: ")
            if before or not field or 13 in value:
                return None
            data = [value]
        elif chunk[-2:] == b"\n\n" and chunk[:6] == b"data: " and 13 not in chunk:
            # Split at each separator: every line end must be one of theirs or the last two
            # (looked for in the joined data: counting them in the chunk reads it byte by
            # byte, where a join and ``in`` copy and search it many bytes at a time).
            data = chunk[6:-2].split(b"\n\ndata: ")
            if 10 in (data[0] if len(data) == 1 else b"".join(data)):
                return None
        else:
            return None
        self._started = True  # the chunk starts with "data: ", so with no BOM
        self._event_bytes = 0
        return data

    def _normalise(self, chunk: bytes) -> bytes:
        """Strip a leading BOM and turn CRLF and lone CR into LF, across chunk boundaries."""
        if not self._started and chunk:
            self._started = True
            chunk = chunk.removeprefix(_BOM)
        if self._skip_lf and chunk:
            self._skip_lf = False
            chunk = chunk.removeprefix(b"\n")
        if 13 in chunk:  # CR
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return chunk

    def _field(self, line: bytes) -> None:
        name, colon, value = line.partition(b":")
        if not name:
            return  # a comment
        if colon and value.startswith(b" "):
            value = value[1:]
        text = value.decode("utf-8", "replace")
        if name == b"data":
            self._data.append(text)
        elif name == b"event":
            self._event = text
        elif name == b"id":
            if "\0" not in text:
                self._last_id = text
        elif name == b"retry" and value.isdigit():
            self.retry = int(value)

    def _dispatch(self) -> SseEvent:
        event = SseEvent("\n".join(self._data), self._event, self._last_id)
        self._data = []
        self._event = None
        self._event_bytes = 0
        return event


def encode_event(data: bytes, event: str | None = None) -> bytes:
    """One event as bytes: ``event: x`` first when named, then ``data:`` line(s), a blank line."""
    if b"\n" in data or b"\r" in data:
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        body = b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    else:
        body = b"data: " + data + b"\n\n"
    if event is None:
        return body
    return b"event: " + event.encode() + b"\n" + body


def json_event(payload: Any, event: str | None = None) -> bytes:
    """``payload`` as JSON in one event (``encode_event``): the way Parley writes SSE."""
    return encode_event(orjson.dumps(payload), event)
