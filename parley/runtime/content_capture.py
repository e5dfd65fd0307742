"""One call's content, caught on the request path for the content log.

The runner makes a ``ContentCapture`` only for a call whose group keeps something
(``ContentLogging.on``), hands it what passes anyway (the request body's bytes, the
whole reply's body, or each piece of a stream as it is written), and when the call ends
(``Metered``) hands it to the content log with the call's outcome (``finish``). Nothing
is parsed here, and nothing is copied beyond the cap: the request and a whole reply are sliced
to ``max_bytes``, and a stream's pieces are appended until ``STREAM_WIRE_FACTOR`` times
that (a stream's framing, ``data: {...}`` around a few characters each, is most of its
bytes; its text is assembled, and cut at ``max_bytes``, off the request path by
``content_document.py``). The last few pieces are kept by reference (no copy) for the
finish reason, which a long stream sends at its end.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from parley.domain.content import ContentLogging

STREAM_WIRE_FACTOR = 4
"""How many times ``max_bytes`` of a stream's own bytes are kept to assemble its text."""
TAIL_PIECES = 4
"""A stream's last pieces kept for its end (the finish reason)."""
TEXT_TYPES = ("application/json", "text/")
"""Content types whose bytes are text: the others' (audio, images) are never kept."""


@dataclass(frozen=True, slots=True)
class PreparedContent:
    """What a capture became off the request path: the stored document's texts, which
    traces may carry (``parley/telemetry/otel.py``) for a policy that keeps text."""

    policy: str
    request_text: str | None
    reply_text: str | None


Listener = Callable[[PreparedContent | None], None]
"""Told once what the capture became, or ``None`` when it was dropped."""


class Finished(Protocol):
    """What takes a finished call's capture (``ContentLog.finished``)."""

    def __call__(
        self,
        capture: ContentCapture,
        *,
        request_id: str,
        group_id: int,
        endpoint: str,
        model: str,
        status: int,
    ) -> None: ...


class ContentCapture:
    __slots__ = (
        "_finished",
        "_room",
        "listeners",
        "logging",
        "max_bytes",
        "queued",
        "reply",
        "reply_bytes",
        "reply_type",
        "request",
        "request_bytes",
        "streamed",
        "tail",
    )

    def __init__(
        self,
        logging: ContentLogging,
        request: bytes | None,
        max_bytes: int,
        finished: Finished | None = None,
    ) -> None:
        self._finished = finished
        self.logging = logging
        self.max_bytes = max_bytes
        self.request_bytes = len(request) if request is not None else 0
        self.request: bytes | None = request[:max_bytes] if request is not None else None
        self.reply = bytearray()
        self.reply_bytes = 0
        self.reply_type = ""
        self.streamed = False
        self.tail: deque[bytes] = deque(maxlen=TAIL_PIECES)
        self._room = max_bytes * STREAM_WIRE_FACTOR
        self.queued = False
        """Taken by the content log's queue (its listeners will be told)."""
        self.listeners: list[Listener] = []

    def whole(self, body: bytes | bytearray, content_type: str) -> None:
        """The reply, answered whole."""
        self.reply_type = content_type
        self.reply_bytes = len(body)
        self.reply[:] = body[: self.max_bytes]

    def stream_opened(self, content_type: str) -> None:
        """A stream starts; a binary one (audio) is counted, and none of it kept."""
        self.streamed = True
        self.reply_type = content_type
        if not content_type.startswith(TEXT_TYPES):
            self._room = 0
            self.tail = deque(maxlen=0)

    def piece(self, data: bytes) -> None:
        """One piece of a stream, as written to the caller."""
        self.reply_bytes += len(data)
        room = self._room
        if room > 0:
            self.reply += data[:room]
            self._room = room - len(data)
        else:
            self.tail.append(data)

    def finish(
        self, *, request_id: str, group_id: int, endpoint: str, model: str, status: int
    ) -> None:
        """The call ended (its usage record says how): hand the capture on, once."""
        finished, self._finished = self._finished, None
        if finished is not None:
            finished(
                self,
                request_id=request_id,
                group_id=group_id,
                endpoint=endpoint,
                model=model,
                status=status,
            )

    @property
    def cut(self) -> bool:
        """The stream's own bytes went past what is kept of them."""
        return self._room < 0 or bool(self.tail)

    def tell(self, prepared: PreparedContent | None) -> None:
        """Tell the listeners (once) what the capture became."""
        listeners, self.listeners = self.listeners, []
        for listener in listeners:
            listener(prepared)
