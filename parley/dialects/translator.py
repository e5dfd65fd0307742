"""The seam every stream translation goes through, sans-IO.

A ``Translator`` is fed the upstream's body as it arrives (any split: half an event, a
dozen events) and returns what the caller is owed for it, in order: the caller's bytes,
or the chunks a job renders. It holds no socket and no event loop, so it is tested with
byte fixtures split at every boundary (h11's lesson). The adapter's reader
(``providers/translated.py``) is the only loop around it: read a piece, feed it, hand on
what comes out.

A translator says what went wrong instead of raising: ``failure`` is set once the
upstream sent an error event, a malformed one, or one past the size bound, and nothing
is produced after it; ``done`` once the upstream said its stream is complete.
``delivered`` is what the caller has been given so far, for metering however the stream
ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from parley.dialects.canonical import JSON
from parley.domain.usage import Usage

T_co = TypeVar("T_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Failure:
    """How an upstream's stream failed: its error event's payload, or a malformed event
    (``malformed``), or an event past the bound (``too_large``)."""

    payload: JSON | None = None
    malformed: bool = False
    too_large: bool = False


class Translator(Protocol[T_co]):
    """Upstream bytes in, the caller's items out (``feed``, then ``end`` at the body's end)."""

    @property
    def failure(self) -> Failure | None: ...

    @property
    def done(self) -> bool: ...

    def feed(self, data: bytes) -> Sequence[T_co]:
        """What ``data`` completes, in order; nothing once ``failure`` or ``done`` is set."""

    def end(self) -> Sequence[T_co]:
        """The body ended: whatever closes the caller's stream (nothing if already done)."""

    def delivered(self) -> Usage | None:
        """The usage of what the caller was given so far; ``None`` if nothing billable."""


def estimate(prompt_estimate: int, characters: int, pieces: int) -> Usage:
    """Parley's own count when the upstream reported none: a token per four characters
    produced (at least one a piece), and the prompt's estimate."""
    completion = max(pieces, (characters + 3) // 4)
    return Usage(prompt_tokens=prompt_estimate, completion_tokens=completion, estimated=True)
