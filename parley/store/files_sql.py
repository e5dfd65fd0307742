"""Uploaded files (``files``) and the chunks of their bytes (``file_chunks``), as queries
on one open connection.

Every read and delete of a file names the group as well as the id: another group's
file is, to a caller, one that does not exist. An expired file is not found, whether or
not pruning has removed it yet. Chunks are written and read one at a time, each its own
short unit of work, so a file never passes whole through memory.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, Connection, RowMapping, and_, delete, func, insert, select

from parley.domain.files import FilePage, StoredFile
from parley.store.schema import file_chunks, files

_table = files


def add_file(conn: Connection, stored: StoredFile) -> None:
    conn.execute(
        insert(_table).values(
            id=stored.id,
            group_id=stored.group_id,
            filename=stored.filename,
            purpose=stored.purpose,
            bytes=stored.bytes,
            created_at=stored.created_at,
            expires_at=stored.expires_at,
        )
    )


def find_file(conn: Connection, file_id: str, group_id: int, now: datetime) -> StoredFile | None:
    row = conn.execute(select(_table).where(_found(file_id, group_id, now))).mappings().first()
    return _stored(row) if row is not None else None


def list_files(
    conn: Connection,
    group_id: int,
    now: datetime,
    *,
    limit: int,
    after: str | None,
    ascending: bool,
    purpose: str | None,
) -> FilePage:
    """A page of the group's unexpired files in id (creation) order, after ``after``."""
    query = select(_table).where(_table.c.group_id == group_id, _unexpired(now))
    if purpose is not None:
        query = query.where(_table.c.purpose == purpose)
    if after is not None:
        query = query.where(_table.c.id > after if ascending else _table.c.id < after)
    order = _table.c.id.asc() if ascending else _table.c.id.desc()
    rows = conn.execute(query.order_by(order).limit(limit + 1)).mappings().all()
    return FilePage([_stored(row) for row in rows[:limit]], len(rows) > limit)


def every_file(
    conn: Connection, group_id: int | None, now: datetime, *, limit: int
) -> list[StoredFile]:
    """The newest ``limit`` unexpired files of one group (or every group's)."""
    query = select(_table).where(_unexpired(now))
    if group_id is not None:
        query = query.where(_table.c.group_id == group_id)
    rows = conn.execute(query.order_by(_table.c.created_at.desc()).limit(limit)).mappings()
    return [_stored(row) for row in rows]


def delete_file(conn: Connection, file_id: str, group_id: int, now: datetime) -> bool:
    """Forget the group's file (its bytes are the caller's to delete after)."""
    gone = delete(_table).where(_found(file_id, group_id, now))
    return bool(conn.execute(gone).rowcount)


def group_file_bytes(conn: Connection, group_id: int, now: datetime) -> int:
    """What the group's unexpired files hold, in bytes."""
    total = select(func.coalesce(func.sum(_table.c.bytes), 0)).where(
        _table.c.group_id == group_id, _unexpired(now)
    )
    return int(conn.execute(total).scalar_one())


def expired_files(conn: Connection, now: datetime, most: int) -> list[str]:
    """Ids of expired files, at most ``most``, for pruning."""
    query = select(_table.c.id).where(_table.c.expires_at <= now).limit(most)
    return list(conn.execute(query).scalars())


def forget_files(conn: Connection, file_ids: list[str]) -> int:
    """Delete these files' rows, whoever owns them (pruning)."""
    if not file_ids:
        return 0
    return int(conn.execute(delete(_table).where(_table.c.id.in_(file_ids))).rowcount)


def add_file_chunk(conn: Connection, file_id: str, seq: int, data: bytes) -> None:
    conn.execute(insert(file_chunks).values(file_id=file_id, seq=seq, data=data))


def file_chunk(conn: Connection, file_id: str, seq: int) -> bytes | None:
    query = select(file_chunks.c.data).where(
        file_chunks.c.file_id == file_id, file_chunks.c.seq == seq
    )
    data = conn.execute(query).scalar_one_or_none()
    return None if data is None else bytes(data)


def delete_file_chunks(conn: Connection, file_id: str) -> None:
    conn.execute(delete(file_chunks).where(file_chunks.c.file_id == file_id))


def _unexpired(now: datetime) -> ColumnElement[bool]:
    return _table.c.expires_at.is_(None) | (_table.c.expires_at > now)


def _found(file_id: str, group_id: int, now: datetime) -> ColumnElement[bool]:
    return and_(_table.c.id == file_id, _table.c.group_id == group_id, _unexpired(now))


def _stored(row: RowMapping) -> StoredFile:
    return StoredFile(
        id=row["id"],
        group_id=row["group_id"],
        filename=row["filename"],
        purpose=row["purpose"],
        bytes=row["bytes"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )
