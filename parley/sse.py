"""Server-Sent Events: an incremental parser for upstream streams, and the encoder.

The parser follows the WHATWG event-stream rules: lines end with LF, CRLF or a lone CR;
``data`` fields of one event are joined with LF; a line starting with ``:`` is a comment;
an empty line dispatches the event (only if it had ``data``). Bytes are buffered until a
whole line has arrived, so a chunk may end anywhere, even inside a UTF-8 character: a
line end is ASCII and never falls inside one.
"""

from __future__ import annotations

from dataclasses import dataclass

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


class SseParser:
    """Feed it the body's chunks as they arrive; it returns the events each one completed."""

    __slots__ = ("_data", "_event", "_last_id", "_partial", "_skip_lf", "_started", "retry")

    def __init__(self) -> None:
        self._partial: list[bytes] = []
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
        if b"\n" not in chunk:
            if chunk:
                self._partial.append(chunk)
            return []
        if self._partial:
            self._partial.append(chunk)
            chunk = b"".join(self._partial)
            self._partial.clear()
        lines = chunk.split(b"\n")
        rest = lines.pop()
        if rest:
            self._partial.append(rest)
        events: list[SseEvent] = []
        for line in lines:
            if line:
                self._field(line)
            elif self._data:
                events.append(self._dispatch())
            else:
                self._event = None
        return events

    def _simple_events(self, chunk: bytes) -> list[SseEvent] | None:
        """The fast path for what nearly every engine sends: whole ``data: ...`` events,
        one line each, ending with the chunk. ``None`` for anything else (a partial line,
        a comment, other fields, multi-line data, CR line ends), left to the full parser.
        """
        if (
            self._partial
            or self._data
            or self._event is not None
            or self._skip_lf
            or not chunk.startswith(b"data: ")
            or not chunk.endswith(b"\n\n")
            or b"\r" in chunk
        ):
            return None
        blocks = chunk[:-2].split(b"\n\n")
        # Each block starts with "data: " and holds no other line end (counted in C, not
        # checked block by block: "data: " inside a value only sends us the slow way).
        count = len(blocks)
        if chunk.count(b"\n\ndata: ") != count - 1 or chunk.count(b"\n") != 2 * count:
            return None
        self._started = True  # the chunk starts with "data: ", so with no BOM
        last_id = self._last_id
        return [SseEvent(block[6:].decode("utf-8", "replace"), None, last_id) for block in blocks]

    def _normalise(self, chunk: bytes) -> bytes:
        """Strip a leading BOM and turn CRLF and lone CR into LF, across chunk boundaries."""
        if not self._started and chunk:
            self._started = True
            chunk = chunk.removeprefix(_BOM)
        if self._skip_lf and chunk:
            self._skip_lf = False
            chunk = chunk.removeprefix(b"\n")
        if b"\r" in chunk:
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
