"""Which refusals become request-log lines of their own, and the one line that counts the
rest: a flood of refused calls costs the database a bounded number of rows.

Refusals are grouped by key, status, error code and UTC minute. The first
``ROWS_PER_MINUTE`` of a group are lines of their own; every further one is counted on
one more line, the first of them standing for all (``UsageRecord.request_count``),
written once its minute is over (or at shutdown). So a key's refusals of one kind take
at most ``ROWS_PER_MINUTE + 1`` rows a minute in each process, however many there were,
and the lines' counts add up to every refusal. This is all in memory, before the usage
writer's queue: nothing is read from the database.
"""

from __future__ import annotations

import dataclasses

from parley.domain.usage import UsageRecord

ROWS_PER_MINUTE = 10
"""Refusals of one key, status and code in one minute stored as lines of their own."""
SECONDS_PER_MINUTE = 60

Kind = tuple[int, int, str | None, int]
"""Key id, status, error code, UTC minute."""


class RefusalRows:
    """Counts refusals per kind and minute; holds the line that counts the rest."""

    def __init__(self, rows_per_minute: int = ROWS_PER_MINUTE) -> None:
        self._rows_per_minute = rows_per_minute
        self._seen: dict[Kind, int] = {}
        self._rest: dict[Kind, UsageRecord] = {}
        """The first refusal past the lines of its own, for each kind that has one."""

    def admit(self, record: UsageRecord) -> bool:
        """Whether ``record`` (a refusal) is a line of its own; if not, it is counted on
        its minute's line for the rest."""
        minute = int(record.created_at.timestamp()) // SECONDS_PER_MINUTE
        kind = (record.key_id, record.status, record.error_code, minute)
        seen = self._seen.get(kind, 0) + 1
        self._seen[kind] = seen
        if seen <= self._rows_per_minute:
            return True
        self._rest.setdefault(kind, record)
        return False

    def ended(self, now: float) -> list[UsageRecord]:
        """The lines for the rest of every minute before the one of ``now`` (a Unix
        time), each counting its refusals; those minutes are forgotten."""
        current = int(now) // SECONDS_PER_MINUTE
        over = [kind for kind in self._seen if kind[3] < current]
        return self._lines(over)

    def all(self) -> list[UsageRecord]:
        """The lines for the rest of every minute, the current one too (at shutdown)."""
        return self._lines(list(self._seen))

    def _lines(self, kinds: list[Kind]) -> list[UsageRecord]:
        lines: list[UsageRecord] = []
        for kind in kinds:
            seen = self._seen.pop(kind)
            first = self._rest.pop(kind, None)
            if first is not None:
                counted = seen - self._rows_per_minute
                lines.append(dataclasses.replace(first, request_count=counted))
        return lines
