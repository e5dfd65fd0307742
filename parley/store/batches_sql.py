"""Batches (``batches``) and their lines (``batch_lines``), as queries on one open
connection.

Reads of a batch by the API name the group: another group's batch is, to a caller, one
that does not exist. The lane's queries (``runnable_batches``, ``lines_in_state``,
``mark_sent``, ``finish_lines``) name batches by id alone. A line's move to ``sent`` is
its own transaction, committed before the line's call starts; a line's result and its
batch's counts are written together.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, and_, func, insert, select, update

from parley.domain.batches import (
    DONE,
    LINE_FAILED,
    QUEUED,
    RUNNING,
    SENT,
    Batch,
    BatchLine,
    BatchPage,
)
from parley.store.schema import batch_lines, batches

_lines = batch_lines
_COLUMNS = tuple(column.name for column in batches.columns)


def add_batch(conn: Connection, batch: Batch) -> None:
    conn.execute(insert(batches).values(**_row(batch)))


def add_batch_lines(conn: Connection, lines: Sequence[BatchLine]) -> None:
    if lines:
        rows = [
            {
                "batch_id": item.batch_id,
                "line": item.line,
                "custom_id": item.custom_id,
                "body": item.body,
                "state": item.state,
                "result": item.result,
            }
            for item in lines
        ]
        conn.execute(insert(_lines), rows)


def find_batch(conn: Connection, batch_id: str, group_id: int | None) -> Batch | None:
    query = select(batches).where(batches.c.id == batch_id)
    if group_id is not None:
        query = query.where(batches.c.group_id == group_id)
    row = conn.execute(query).mappings().first()
    return _batch(row) if row is not None else None


def list_batches(conn: Connection, group_id: int, *, limit: int, after: str | None) -> BatchPage:
    """A page of the group's batches, newest first, those older than ``after``."""
    query = select(batches).where(batches.c.group_id == group_id)
    if after is not None:
        query = query.where(batches.c.id < after)
    rows = conn.execute(query.order_by(batches.c.id.desc()).limit(limit + 1)).mappings().all()
    return BatchPage([_batch(row) for row in rows[:limit]], len(rows) > limit)


def set_status(
    conn: Connection,
    /,
    batch_id: str,
    status: str,
    now: datetime,
    *,
    only_from: Sequence[str],
    **columns: Any,
) -> bool:
    """Move the batch to ``status`` (stamping ``<status>_at``) if it is in one of
    ``only_from``; whether it moved."""
    stamp = {f"{status}_at": now}
    moved = update(batches).where(batches.c.id == batch_id, batches.c.status.in_(only_from))
    return bool(conn.execute(moved.values(status=status, **stamp, **columns)).rowcount)


def runnable_batches(conn: Connection) -> list[Batch]:
    """Batches the lane has work on, oldest first."""
    query = select(batches).where(batches.c.status.in_(RUNNING)).order_by(batches.c.id)
    return [_batch(row) for row in conn.execute(query).mappings()]


def lines_in_state(
    conn: Connection, batch_id: str, state: str, *, after: int = 0, most: int = 1000
) -> list[BatchLine]:
    """The batch's lines in ``state``, in line order, after line ``after``."""
    query = (
        select(_lines)
        .where(_lines.c.batch_id == batch_id, _lines.c.state == state, _lines.c.line > after)
        .order_by(_lines.c.line)
        .limit(most)
    )
    return [_line(row) for row in conn.execute(query).mappings()]


def count_lines(conn: Connection, batch_id: str, states: Sequence[str]) -> int:
    query = select(func.count()).where(_lines.c.batch_id == batch_id, _lines.c.state.in_(states))
    return int(conn.execute(query).scalar_one())


def mark_sent(conn: Connection, batch_id: str, line: int) -> bool:
    """Record a queued line as sent, before its call starts; ``False`` when it was no
    longer queued, or its batch no longer runs new lines (then it must not be sent)."""
    running = (
        select(batches.c.id).where(batches.c.id == batch_id, batches.c.status == "in_progress")
    ).exists()
    moved = (
        update(_lines)
        .where(_lines.c.batch_id == batch_id, _lines.c.line == line, _lines.c.state == QUEUED)
        .where(running)
        .values(state=SENT)
    )
    return bool(conn.execute(moved).rowcount)


def requeue(conn: Connection, batch_id: str, line: int) -> None:
    """Put back a line whose call was refused before it was admitted (nothing was sent)."""
    back = update(_lines).where(
        _lines.c.batch_id == batch_id, _lines.c.line == line, _lines.c.state == SENT
    )
    conn.execute(back.values(state=QUEUED))


def finish_lines(
    conn: Connection,
    batch_id: str,
    outcomes: Sequence[tuple[int, str, str | None]],
    *,
    from_state: str,
) -> int:
    """Give each line ``(line, state, result)`` its end if it is still in ``from_state``
    (a line in flight is ended by its call alone, never by an expiry), and count the
    ``done`` and ``failed`` ones on the batch; how many lines ended."""
    ended = {DONE: 0, LINE_FAILED: 0}
    count = 0
    for line, state, result in outcomes:
        moved = update(_lines).where(
            _lines.c.batch_id == batch_id,
            _lines.c.line == line,
            _lines.c.state == from_state,
        )
        if conn.execute(moved.values(state=state, result=result)).rowcount:
            count += 1
            if state in ended:
                ended[state] += 1
    if ended[DONE] or ended[LINE_FAILED]:
        counts = update(batches).where(batches.c.id == batch_id)
        conn.execute(
            counts.values(
                completed=batches.c.completed + ended[DONE],
                failed=batches.c.failed + ended[LINE_FAILED],
            )
        )
    return count


def results(
    conn: Connection, batch_id: str, state: str, *, after: int, most: int
) -> list[tuple[int, str]]:
    """The results of the batch's lines in ``state`` (``done`` or ``failed``), in line
    order after line ``after``: one page of its output or error file."""
    query = (
        select(_lines.c.line, _lines.c.result)
        .where(
            and_(_lines.c.batch_id == batch_id, _lines.c.state == state, _lines.c.line > after),
            _lines.c.result.is_not(None),
        )
        .order_by(_lines.c.line)
        .limit(most)
    )
    return [(row.line, row.result) for row in conn.execute(query)]


def line_counts(conn: Connection, batch_id: str) -> dict[str, int]:
    """How many of the batch's lines are in each state."""
    query = (
        select(_lines.c.state, func.count())
        .where(_lines.c.batch_id == batch_id)
        .group_by(_lines.c.state)
    )
    return {state: int(count) for state, count in conn.execute(query).all()}


def _row(batch: Batch) -> dict[str, Any]:
    return {name: getattr(batch, name) for name in _COLUMNS}


def _batch(row: RowMapping) -> Batch:
    return Batch(**{name: row[name] for name in _COLUMNS})


def _line(row: RowMapping) -> BatchLine:
    return BatchLine(
        batch_id=row["batch_id"],
        line=row["line"],
        custom_id=row["custom_id"],
        body=row["body"],
        state=row["state"],
        result=row["result"],
    )
