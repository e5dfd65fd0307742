"""An Anthropic Messages stream relayed to a Messages caller, sans-IO.

Both ends speak one dialect, so the bytes go through as they came: thinking blocks and
their signatures, citations, server tools and fields no one here knows yet. Only the
first event, ``message_start``, is rewritten, to name the caller's model instead of the
upstream's. Every byte is also parsed, to read the usage (``message_start`` holds the
input counts, ``message_delta`` the cumulative output) and to see an ``error`` event,
which is the stream's ``failure``, as is a body that ends before ``message_stop``. A
read of whole ``event:`` + ``data:`` events, how Anthropic writes them, is split by
``_whole`` without the general SSE parser; any other read (a partial line, a comment, CR
line ends) goes through the parser.
"""

from __future__ import annotations

import orjson

from parley import upstream_json
from parley.dialects.anthropic_messages_reply import read_usage
from parley.dialects.translator import TRUNCATED, Failure, estimate
from parley.domain.usage import Usage, with_estimate
from parley.domain.wire import JSON
from parley.sse import EventTooLarge, SseParser

_ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")


class MessagesRelay:
    """``Translator[bytes]``: Messages events in, the same bytes out (the model renamed)."""

    __slots__ = (
        "_characters",
        "_clean",
        "_counted",
        "_head",
        "_limit",
        "_model",
        "_parser",
        "_prompt_estimate",
        "_usage",
        "done",
        "failure",
    )

    def __init__(self, model: str, prompt_estimate: int, max_event_bytes: int) -> None:
        self._model = model
        self._prompt_estimate = prompt_estimate
        self._parser = SseParser(max_event_bytes)
        self._limit = max_event_bytes
        self._clean = True
        """The last read ended between events: the parser holds nothing."""
        self._head: bytes | None = b""
        """The bytes before the first event's end, held until it is whole; ``None`` after."""
        self._usage: JSON = {}
        """The usage as sent (``message_start``'s, updated by ``message_delta``'s)."""
        self._counted = False
        """``message_delta`` gave the output count."""
        self._characters = 0
        self.done = False
        self.failure: Failure | None = None

    def feed(self, data: bytes) -> list[bytes]:
        if self.done or self.failure is not None:
            return []
        events = self._whole(data) if self._clean else None
        if events is None:
            try:
                events = [(event.event, event.data) for event in self._parser.feed(data)]
            except EventTooLarge as error:
                events = [(event.event, event.data) for event in error.events]
                self.failure = Failure(too_large=True)
        self._clean = data[-2:] == b"\n\n"
        passed = self._pass(data)
        for name, payload in events:
            self._observe(name, payload)
            if self.failure is not None:
                # What came before the error event goes on; the job tells the error in its
                # own words.
                at = passed.find(b"event: error")
                passed = passed[:at] if at >= 0 else b""
                break
        return [passed] if passed else []

    def _whole(self, data: bytes) -> list[tuple[str | None, str | bytes]] | None:
        """The events of a read that holds whole ``event: name`` + ``data: ...`` events and
        nothing else, as Anthropic writes them, split without the general parser (which is
        then left as it was: between events); ``None`` for any other read."""
        if data[-2:] != b"\n\n" or len(data) > self._limit or data.find(b"\r") >= 0:
            return None
        events: list[tuple[str | None, str | bytes]] = []
        for block in data[:-2].split(b"\n\n"):
            head, separator, payload = block.partition(b"\ndata: ")
            if not separator or not head.startswith(b"event: ") or payload.find(b"\n") >= 0:
                return None
            if head.find(b"\n") >= 0:
                return None
            events.append((head[7:].decode("latin-1"), payload))
        return events

    def end(self) -> list[bytes]:
        if not self.done and self.failure is None:
            self.failure = TRUNCATED  # no ``message_stop``: the stream was cut short
        return []

    def delivered(self) -> Usage | None:
        """The upstream's counts once ``message_delta`` gave the output; before that, the
        input it gave (or the estimate) and the output estimated from what was relayed."""
        usage = read_usage(self._usage)
        guess = estimate(self._prompt_estimate, self._characters, 1) if self._characters else None
        if usage is not None and self._counted:
            return with_estimate(usage, guess)
        if guess is None or usage is None:
            return guess
        return Usage(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=guess.completion_tokens,
            cached_tokens=usage.cached_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            estimated=True,
        )

    def _pass(self, data: bytes) -> bytes:
        """``data`` as relayed: the first event held until whole, then renamed."""
        if self._head is None:
            return data
        held = self._head + data
        ends = [at for at in (held.find(end) for end in _ENDS) if at >= 0]
        if not ends:
            self._head = held
            return b""
        self._head = None
        cut = min(ends)
        size = next(len(end) for end in _ENDS if held.find(end) == cut)
        return self._renamed(held[: cut + size]) + held[cut + size :]

    def _renamed(self, event: bytes) -> bytes:
        """The first event with the caller's model, if it is ``message_start``."""
        name, _, rest = event.partition(b"\n")
        if name.strip() != b"event: message_start" or not rest.startswith(b"data: "):
            return event
        line, _, tail = rest.partition(b"\n")
        try:
            start = upstream_json.loads(line[6:])
            start["message"]["model"] = self._model
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return event
        return name + b"\ndata: " + orjson.dumps(start) + b"\n" + tail

    def _observe(self, name: str | None, data: str | bytes) -> None:
        try:
            event = upstream_json.loads(data)
        except orjson.JSONDecodeError:
            self.failure = Failure(malformed=True)
            return
        if not isinstance(event, dict):
            self.failure = Failure(malformed=True)
            return
        kind = event.get("type", name)
        if kind == "message_start":
            message = event.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self._usage = dict(usage) if isinstance(usage, dict) else {}
        elif kind == "content_block_delta":
            delta = event.get("delta")
            if isinstance(delta, dict):
                for field in ("text", "thinking", "partial_json"):
                    piece = delta.get(field)
                    if isinstance(piece, str):
                        self._characters += len(piece)
        elif kind == "message_delta":
            self._delta_usage(event.get("usage"))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error" or name == "error":
            self.failure = Failure(payload=event)

    def _delta_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        self._counted = self._counted or "output_tokens" in usage
        self._usage.update((name, value) for name, value in usage.items() if value is not None)
