"""The realtime sessions open in this process: who holds each (group, key), its model,
when it began and how many turns it has taken. The dashboard's Realtime page lists them
and ``/metrics`` counts them per model (``parley_realtime_sessions``).

Each session has an id (``domain/realtime_sessions.py``) that begins the request id of
every line it writes to the request log. The book is this process's own: with
``serve --workers N`` each worker lists the sessions it serves (docs/realtime.md).
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from parley.domain.realtime_sessions import new_session_id


@dataclass(slots=True, eq=False)
class LiveSession:
    """One open session, as the operator sees it (never its key's secret: its label and
    prefix)."""

    id: str
    model: str
    kind: str
    """``relay`` (an upstream's realtime session) or ``cascade`` (Parley's own)."""
    group_id: int
    group: str
    key_id: int
    key_name: str
    key_prefix: str
    started_at: datetime
    began: float = field(default_factory=time.monotonic)
    turns: int = 0
    """Responses admitted so far."""
    _lines: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def request_id(self) -> str:
        """A new request id for one of the session's request-log lines."""
        return f"{self.id}_{next(self._lines)}"

    def turn(self) -> None:
        """A response was admitted."""
        self.turns += 1

    def seconds(self) -> float:
        """How long the session has been open."""
        return time.monotonic() - self.began


class LiveSessions:
    __slots__ = ("_counts", "_open")

    def __init__(self) -> None:
        self._open: dict[str, LiveSession] = {}
        self._counts: Counter[str] = Counter()

    def opened(
        self,
        *,
        model: str,
        kind: str,
        group_id: int,
        group: str,
        key_id: int,
        key_name: str,
        key_prefix: str,
    ) -> LiveSession:
        """A session begins: its entry, with a new id."""
        session = LiveSession(
            new_session_id(),
            model,
            kind,
            group_id,
            group,
            key_id,
            key_name,
            key_prefix,
            datetime.now(UTC),
        )
        self._open[session.id] = session
        self._counts[model] += 1
        return session

    def closed(self, session: LiveSession) -> None:
        if self._open.pop(session.id, None) is not None:
            self._counts[session.model] -= 1

    def sessions(self, group_id: int | None = None) -> list[LiveSession]:
        """The open sessions (of one group, when given), oldest first."""
        found = self._open.values()
        return [s for s in found if group_id is None or s.group_id == group_id]

    def by_model(self) -> dict[str, int]:
        """Open sessions per model (0 for a model whose sessions all ended)."""
        return dict(self._counts)

    def __len__(self) -> int:
        return len(self._open)
