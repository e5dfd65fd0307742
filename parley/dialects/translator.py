"""The seam every stream translation goes through, sans-IO.

A ``Translator`` is fed the upstream's body as it arrives (any split: half an event, a
dozen events) and returns what the caller is owed for it, in order: the caller's bytes,
or the chunks a job renders. It holds no socket and no event loop, so it is tested with
byte fixtures split at every boundary (h11's lesson). The adapter's reader
(``providers/translated.py``) is the only loop around it: read a piece, feed it, hand on
what comes out.

A translator says what went wrong instead of raising: ``failure`` is set once the
upstream sent an error event, a malformed one, or one past the size bound, and nothing
is produced after it; ``done`` once the upstream said its stream is complete. A body
that ends before the upstream's own end of stream (OpenAI's ``[DONE]``, Anthropic's
``message_stop``, Gemini's ``finishReason``, Converse's ``messageStop``, a terminal
``response.*`` event) is a failure too (``truncated``), set by ``end``: a stream cut
short is never passed on as one that finished.
``delivered`` is what the caller has been given so far, for metering however the stream
ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from parley.domain.usage import Usage, with_estimate
from parley.domain.wire import JSON
from parley.sse import EventTooLarge, SseParser

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Failure:
    """How an upstream's stream failed: its error event's payload, or a malformed event
    (``malformed``), or an event past the bound (``too_large``), or a body that ended
    before the stream did (``truncated``)."""

    payload: JSON | None = None
    malformed: bool = False
    too_large: bool = False
    truncated: bool = False


TRUNCATED = Failure(truncated=True)
"""The failure of a stream whose body ended before the upstream's end of stream."""


class Translator(Protocol[T_co]):
    """Upstream bytes in, the caller's items out (``feed``, then ``end`` at the body's end)."""

    @property
    def failure(self) -> Failure | None: ...

    @property
    def done(self) -> bool: ...

    def feed(self, data: bytes) -> Sequence[T_co]:
        """What ``data`` completes, in order; nothing once ``failure`` or ``done`` is set."""

    def end(self) -> Sequence[T_co]:
        """The body ended: whatever closes the caller's stream (nothing if already done),
        or ``failure`` set to ``TRUNCATED`` when the upstream's end of stream never came."""

    def delivered(self) -> Usage | None:
        """The usage of what the caller was given so far; ``None`` if nothing billable."""


class ChunkTranslator(Translator[T_co], Protocol[T_co]):
    """A caller's translator that also takes the canonical stream: chat chunks
    (``chat.completion.chunk`` objects) an upstream's own translator already read.

    Every generation upstream's stream is read into chat chunks (the OpenAI adapter's
    are the upstream's own; ``MessagesToChat`` reads Anthropic's, and every other
    provider has its own reader), so a caller's dialect renders from chunks once and
    reaches every channel kind through ``Chained``."""

    def feed_chunks(self, chunks: Sequence[JSON]) -> Sequence[T_co]:
        """What these chunks make for the caller, in order; nothing once ``failure`` or
        ``done`` is set."""

    def finish(self) -> Sequence[T_co]:
        """The upstream's reader said its stream is complete: whatever closes the
        caller's (``end`` is for a body this translator read itself, whose own end of
        stream it must have seen)."""


class Chained(Generic[T]):
    """``Translator[T]``: an upstream's bytes read into chat chunks by ``first``, then
    rendered for the caller by ``second``. Either side's failure is the chain's; the
    upstream saying it is done ends the caller's stream. Usage is what the upstream
    reported (``first``), carrying the caller's own count of what it was given as its
    estimate, else that count."""

    __slots__ = ("_first", "_second")

    def __init__(self, first: Translator[JSON], second: ChunkTranslator[T]) -> None:
        self._first = first
        self._second = second

    @property
    def failure(self) -> Failure | None:
        return self._first.failure or self._second.failure

    @property
    def done(self) -> bool:
        return self._second.done

    def feed(self, data: bytes) -> Sequence[T]:
        if self.done or self.failure is not None:
            return ()
        chunks = self._first.feed(data)
        out = list(self._second.feed_chunks(chunks)) if chunks else []
        if self._first.done and self._first.failure is None:
            out.extend(self._second.finish())
        return out

    def end(self) -> Sequence[T]:
        if self.done or self.failure is not None:
            return ()
        out = list(self._second.feed_chunks(self._first.end()))
        if self.failure is None:
            out.extend(self._second.finish())
        return out

    def delivered(self) -> Usage | None:
        found = self._first.delivered()
        own = self._second.delivered()
        if found is None or found.estimated:
            return own or found
        if own is not None and not own.estimated:
            own = own.fallback  # the same report, read again from the usage chunk
        return with_estimate(found, own)


def estimate(prompt_estimate: int, characters: int, pieces: int) -> Usage:
    """Parley's own count when the upstream reported none: a token per four characters
    produced (at least one a piece), and the prompt's estimate."""
    completion = max(pieces, (characters + 3) // 4)
    return Usage(prompt_tokens=prompt_estimate, completion_tokens=completion, estimated=True)


def delivered_estimate(prompt_estimate: int, characters: int, pieces: int) -> Usage | None:
    """``estimate`` of what a stream delivered, ``None`` when it delivered nothing."""
    return estimate(prompt_estimate, characters, pieces) if pieces else None


def sse_data(parser: SseParser, data: bytes) -> tuple[list[str], bool]:
    """The data of each event ``data`` completes, and whether the next one went past the
    parser's size bound (the events before it are still given, for the translator to
    read before it records ``Failure(too_large=True)``)."""
    try:
        return [event.data for event in parser.feed(data)], False
    except EventTooLarge as error:
        return [event.data for event in error.events], True
