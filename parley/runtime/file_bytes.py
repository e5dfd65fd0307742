"""Where uploaded files' bytes are kept: a folder, or the database in chunks.

A SQLite deployment keeps them in a folder beside its database file (``FolderBytes``):
each upload is written to a temporary name as it arrives and renamed once whole, so a
reader never sees half a file. A PostgreSQL deployment keeps them in the database
(``DatabaseBytes``, the ``file_chunks`` table), so every instance behind it sees every
file. Either way a file passes through memory one piece at a time (``chunk_bytes``),
and every disk access runs on a thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import IO, Protocol

from parley.store.base import FileStore

PARTIAL = ".part"
"""The suffix of a file still being written to a folder."""


class FileBytes(Protocol):
    async def write(self, file_id: str, pieces: AsyncIterable[bytes]) -> int:
        """Keep ``pieces`` as the file's bytes, in order; how many there were. Whatever
        the iteration raises is raised after what was written is removed."""

    def read(self, file_id: str) -> AsyncIterator[bytes]:
        """The file's bytes, piece by piece."""

    async def delete(self, file_id: str) -> None:
        """Remove the file's bytes (nothing when there are none)."""

    def close(self) -> None:
        """Let go of what the keeper made for itself (a temporary folder)."""


class FolderBytes:
    """Files' bytes as files of a folder, named by their id."""

    def __init__(self, folder: Path, chunk_bytes: int, *, temporary: bool = False) -> None:
        self.folder = folder
        """Made with the first file written to it."""
        self._chunk = chunk_bytes
        self._temporary = temporary

    async def write(self, file_id: str, pieces: AsyncIterable[bytes]) -> int:
        final = self.folder / file_id
        partial = self.folder / f"{file_id}{PARTIAL}"
        await asyncio.to_thread(self.folder.mkdir, parents=True, exist_ok=True)
        sink = await asyncio.to_thread(partial.open, "wb")
        size = 0
        try:
            pending: list[bytes] = []
            held = 0
            async for piece in pieces:
                pending.append(piece)
                held += len(piece)
                size += len(piece)
                if held >= self._chunk:
                    await asyncio.to_thread(_write_all, sink, pending)
                    pending, held = [], 0
            await asyncio.to_thread(_write_all, sink, pending)
            await asyncio.to_thread(_finish, sink, partial, final)
        except BaseException:
            await asyncio.to_thread(_discard, sink, partial)
            raise
        return size

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        source = await asyncio.to_thread((self.folder / file_id).open, "rb")
        try:
            while piece := await asyncio.to_thread(source.read, self._chunk):
                yield piece
        finally:
            await asyncio.to_thread(source.close)

    async def delete(self, file_id: str) -> None:
        await asyncio.to_thread((self.folder / file_id).unlink, missing_ok=True)

    def close(self) -> None:
        if self._temporary:
            shutil.rmtree(self.folder, ignore_errors=True)


class DatabaseBytes:
    """Files' bytes as rows of ``file_chunks``, one piece of ``chunk_bytes`` a row, each
    written and read in a short unit of work of its own."""

    def __init__(self, store: FileStore, chunk_bytes: int) -> None:
        self._store = store
        self._chunk = chunk_bytes

    async def write(self, file_id: str, pieces: AsyncIterable[bytes]) -> int:
        size = 0
        seq = 0
        pending = bytearray()
        try:
            async for piece in pieces:
                pending += piece
                size += len(piece)
                while len(pending) >= self._chunk:
                    await self._store.add_file_chunk(file_id, seq, bytes(pending[: self._chunk]))
                    del pending[: self._chunk]
                    seq += 1
            if pending or seq == 0:
                await self._store.add_file_chunk(file_id, seq, bytes(pending))
        except BaseException:
            await asyncio.shield(self._store.delete_file_chunks(file_id))
            raise
        return size

    async def read(self, file_id: str) -> AsyncIterator[bytes]:
        seq = 0
        while (piece := await self._store.file_chunk(file_id, seq)) is not None:
            if piece:
                yield piece
            seq += 1

    async def delete(self, file_id: str) -> None:
        await self._store.delete_file_chunks(file_id)

    def close(self) -> None:
        return None


def file_bytes(
    dialect: str, database_file: str | None, folder: str | None, store: FileStore, chunk: int
) -> FileBytes:
    """The keeper for this deployment: the database's chunks on PostgreSQL; otherwise
    ``folder``, or ``<name>-files`` beside a SQLite file ``<name>.db``, or a temporary
    folder for a memory database (gone when the process ends, like the database)."""
    if dialect == "postgresql":
        return DatabaseBytes(store, chunk)
    if folder is not None:
        return FolderBytes(Path(folder), chunk)
    if database_file is not None:
        database = Path(database_file)
        return FolderBytes(database.with_name(f"{database.stem}-files"), chunk)
    return FolderBytes(Path(tempfile.mkdtemp(prefix="parley-files-")), chunk, temporary=True)


def _write_all(sink: IO[bytes], pieces: list[bytes]) -> None:
    for piece in pieces:
        sink.write(piece)


def _finish(sink: IO[bytes], partial: Path, final: Path) -> None:
    sink.flush()
    os.fsync(sink.fileno())
    sink.close()
    partial.replace(final)


def _discard(sink: IO[bytes], partial: Path) -> None:
    with contextlib.suppress(OSError):
        sink.close()
    partial.unlink(missing_ok=True)
