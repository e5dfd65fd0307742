"""Batches (``batches``) and their lines (``batch_lines``), as queries on one open
connection.

Reads of a batch by the API name the group: another group's batch is, to a caller, one
that does not exist. The lane's queries (``runnable_batches``, ``claim_lines``,
``mark_sent``, ``finish_lines``) name batches by id alone. A line's move to ``sent`` is
its own transaction, committed before the line's call starts; a line's result and its
batch's counts are written together.

Several instances share the work through the lanes' leases (``batch_lanes``): a lane
takes queued lines with ``SELECT ... FOR UPDATE SKIP LOCKED`` (on PostgreSQL; SQLite
has one writer at a time and ignores the clause), so two lanes never take one line and
neither waits on the other's; a line taken or sent names its lane (``owner``). A lane
whose lease ran out (or that has none) is dead, and what it held is the others' to end
(``orphans``, ``requeue_orphans``, ``take_batch``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    RowMapping,
    and_,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)

from parley.domain.batches import (
    CLAIMED,
    DONE,
    ENDED,
    IN_PROGRESS,
    LINE_FAILED,
    MESSAGES_ENDPOINT,
    QUEUED,
    RUNNING,
    SENT,
    Batch,
    BatchLine,
    BatchPage,
)
from parley.store.records import batch
from parley.store.schema import batch_lanes, batch_lines, batches

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
    return batch(row) if row is not None else None


def list_batches(
    conn: Connection,
    group_id: int,
    *,
    limit: int,
    after: str | None = None,
    before: str | None = None,
    messages: bool = False,
) -> BatchPage:
    """A page of the group's batches, newest first: those older than ``after``, or the
    ``limit`` just newer than ``before``. ``messages``: its Message Batches (Anthropic's
    API) alone, else its other batches alone."""
    query = select(batches).where(batches.c.group_id == group_id)
    if messages:
        query = query.where(batches.c.endpoint == MESSAGES_ENDPOINT)
    else:
        query = query.where(batches.c.endpoint != MESSAGES_ENDPOINT)
    if before is not None:
        query = query.where(batches.c.id > before).order_by(batches.c.id)
        newer = conn.execute(query.limit(limit + 1)).mappings().all()
        more = len(newer) > limit
        return BatchPage([batch(row) for row in reversed(newer[:limit])], more)
    if after is not None:
        query = query.where(batches.c.id < after)
    rows = conn.execute(query.order_by(batches.c.id.desc()).limit(limit + 1)).mappings().all()
    return BatchPage([batch(row) for row in rows[:limit]], len(rows) > limit)


def every_batch(
    conn: Connection, group_id: int | None, *, status: str | None, limit: int
) -> list[Batch]:
    """The newest ``limit`` batches of both kinds, of one group (or every group's), in
    one status (or any): the admin surface's list."""
    query = select(batches)
    if group_id is not None:
        query = query.where(batches.c.group_id == group_id)
    if status is not None:
        query = query.where(batches.c.status == status)
    rows = conn.execute(query.order_by(batches.c.created_at.desc()).limit(limit)).mappings()
    return [batch(row) for row in rows]


def delete_batch(conn: Connection, batch_id: str, group_id: int) -> bool:
    """Delete an ended batch of the group and its lines; whether it was."""
    gone = delete(batches).where(
        batches.c.id == batch_id, batches.c.group_id == group_id, batches.c.status.in_(ENDED)
    )
    if not conn.execute(gone).rowcount:
        return False
    conn.execute(delete(_lines).where(_lines.c.batch_id == batch_id))
    return True


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
    return [batch(row) for row in conn.execute(query).mappings()]


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


def claim_lines(conn: Connection, batch_id: str, lane: str, *, most: int) -> list[BatchLine]:
    """Take up to ``most`` queued lines of a batch in progress for ``lane``, in line
    order, skipping those another lane is taking at this moment; the lines taken (now
    ``claimed``: not sent, and no other lane's)."""
    free = (
        select(_lines.c.line)
        .where(_lines.c.batch_id == batch_id, _lines.c.state == QUEUED, _running(batch_id))
        .order_by(_lines.c.line)
        .limit(most)
        .with_for_update(skip_locked=True)
    )
    numbers = list(conn.execute(free).scalars())
    if not numbers:
        return []
    conn.execute(
        update(_lines)
        .where(_lines.c.batch_id == batch_id, _lines.c.line.in_(numbers))
        .where(_lines.c.state == QUEUED)
        .values(state=CLAIMED, owner=lane)
    )
    taken = select(_lines).where(
        _lines.c.batch_id == batch_id,
        _lines.c.line.in_(numbers),
        _lines.c.state == CLAIMED,
        _lines.c.owner == lane,
    )
    return [_line(row) for row in conn.execute(taken.order_by(_lines.c.line)).mappings()]


def mark_sent(conn: Connection, batch_id: str, line: int, lane: str, now: datetime) -> bool:
    """Record a line ``lane`` claimed as sent, before its call starts; ``False`` when it
    is no longer the lane's claim, or its batch no longer runs new lines (cancelled, or
    past its expiry: then it must not be sent)."""
    moved = (
        update(_lines)
        .where(_lines.c.batch_id == batch_id, _lines.c.line == line, _lines.c.state == CLAIMED)
        .where(_lines.c.owner == lane, _running(batch_id, now))
        .values(state=SENT)
    )
    return bool(conn.execute(moved).rowcount)


def release(
    conn: Connection, batch_id: str, lines: Sequence[int], lane: str, *, from_state: str
) -> int:
    """Put back in the queue lines of ``lane`` never sent: claimed and not started, or
    ``sent`` but refused before admission; how many were."""
    back = update(_lines).where(
        _lines.c.batch_id == batch_id,
        _lines.c.line.in_(list(lines)),
        _lines.c.state == from_state,
        _lines.c.owner == lane,
    )
    return int(conn.execute(back.values(state=QUEUED, owner=None)).rowcount)


def orphans(
    conn: Connection, batch_id: str, state: str, lane: str, now: datetime, *, most: int
) -> list[BatchLine]:
    """The batch's lines in ``state`` held by a dead lane (or by none), in line order;
    ``lane`` (the one asking) is alive."""
    query = (
        select(_lines)
        .where(_lines.c.batch_id == batch_id, _lines.c.state == state, _dead(lane, now))
        .order_by(_lines.c.line)
        .limit(most)
    )
    return [_line(row) for row in conn.execute(query).mappings()]


def requeue_orphans(conn: Connection, batch_id: str, lane: str, now: datetime) -> int:
    """Put back in the queue the lines a dead lane claimed (never sent); how many.
    ``lane`` (the one asking) is alive."""
    back = update(_lines).where(
        _lines.c.batch_id == batch_id, _lines.c.state == CLAIMED, _dead(lane, now)
    )
    return int(conn.execute(back.values(state=QUEUED, owner=None)).rowcount)


def take_batch(conn: Connection, batch_id: str, lane: str, now: datetime) -> bool:
    """Make ``lane`` the one that ends the batch (writes its results), unless a live
    lane already is; whether it is now."""
    mine = (
        update(batches)
        .where(batches.c.id == batch_id)
        .where(or_(batches.c.owner == lane, batches.c.owner.is_(None), _dead_lane(now)))
        .values(owner=lane)
    )
    return bool(conn.execute(mine).rowcount)


def beat_lane(conn: Connection, lane: str, until: datetime, now: datetime) -> None:
    """Renew ``lane``'s lease until ``until`` (adding it the first time), and forget
    the lanes whose lease ran out (what they held is already the others')."""
    conn.execute(delete(batch_lanes).where(batch_lanes.c.expires_at < now))
    renewed = update(batch_lanes).where(batch_lanes.c.id == lane).values(expires_at=until)
    if not conn.execute(renewed).rowcount:
        conn.execute(insert(batch_lanes).values(id=lane, expires_at=until))


def drop_lanes(conn: Connection, lane: str, *, others: bool) -> None:
    """End ``lane``'s lease (it stopped), or (``others``) every lease but its own: on a
    database one instance runs the lane on, a lane that starts is the only one."""
    column = batch_lanes.c.id
    conn.execute(delete(batch_lanes).where(column != lane if others else column == lane))


def _running(batch_id: str, now: datetime | None = None) -> ColumnElement[bool]:
    """The batch is in progress (and, given ``now``, not past its expiry)."""
    query = select(batches.c.id).where(batches.c.id == batch_id, batches.c.status == IN_PROGRESS)
    if now is not None:
        query = query.where(batches.c.expires_at > now)
    return query.exists()


def _live(now: datetime) -> Any:
    return select(batch_lanes.c.id).where(batch_lanes.c.expires_at > now)


def _dead(lane: str, now: datetime) -> ColumnElement[bool]:
    """A line's owner is dead: none, or neither ``lane`` nor a lane whose lease runs."""
    owner = _lines.c.owner
    return or_(owner.is_(None), and_(owner != lane, owner.not_in(_live(now))))


def _dead_lane(now: datetime) -> ColumnElement[bool]:
    return batches.c.owner.not_in(_live(now))


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


def all_results(conn: Connection, batch_id: str, *, after: int, most: int) -> list[tuple[int, str]]:
    """Every result of the batch's ended lines, in line order after line ``after``."""
    query = (
        select(_lines.c.line, _lines.c.result)
        .where(_lines.c.batch_id == batch_id, _lines.c.line > after)
        .where(_lines.c.result.is_not(None))
        .order_by(_lines.c.line)
        .limit(most)
    )
    return [(row.line, row.result) for row in conn.execute(query)]


def counts_of(conn: Connection, batch_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """How many lines of each batch are in each state."""
    found: dict[str, dict[str, int]] = {batch_id: {} for batch_id in batch_ids}
    if not batch_ids:
        return found
    query = (
        select(_lines.c.batch_id, _lines.c.state, func.count())
        .where(_lines.c.batch_id.in_(list(batch_ids)))
        .group_by(_lines.c.batch_id, _lines.c.state)
    )
    for batch_id, state, count in conn.execute(query).all():
        found[batch_id][state] = int(count)
    return found


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


def _line(row: RowMapping) -> BatchLine:
    return BatchLine(
        batch_id=row["batch_id"],
        line=row["line"],
        custom_id=row["custom_id"],
        body=row["body"],
        state=row["state"],
        result=row["result"],
        owner=row["owner"],
    )
