"""Spill files: what the database did not take at shutdown, kept on local disk and
written at the next start.

A spill is one JSON object a line, in ``<stem>-<pid>.jsonl`` in the spill directory
(``usage.spill_dir``): the usage writer's records and the stored responses each have a
stem of their own. At start each file is claimed by renaming it (``.replaying-<pid>``),
so of several workers starting together one replays it, handed to its writer, and
removed once written, or renamed back for the next start when the database refuses. A
file written whose removal did not happen (a crash between the two) is replayed again,
so what a replay writes must be idempotent: the store ignores a row it already has.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

import orjson

Rows = list[dict[str, Any]]


class SpillFiles:
    """The spill files of one kind of row in one directory."""

    def __init__(self, directory: str | Path, stem: str) -> None:
        self._directory = Path(directory)
        self._stem = stem

    @property
    def pattern(self) -> str:
        """The glob of this kind's files waiting to be replayed."""
        return f"{self._stem}-*.jsonl"

    def keep(self, rows: Iterable[dict[str, Any]]) -> Path:
        """Append ``rows`` to this process's file; the file's path."""
        path = self._directory / f"{self._stem}-{os.getpid()}.jsonl"
        with path.open("ab") as spill:
            spill.writelines(orjson.dumps(row) + b"\n" for row in rows)
        return path

    async def replay(self, write: Callable[[Rows], Awaitable[bool]]) -> list[tuple[Path, int]]:
        """Hand each file's rows to ``write`` (True: written) and remove the file once
        written; the files replayed and how many rows each held."""
        replayed: list[tuple[Path, int]] = []
        # start-up only, before any request: a directory listing may block briefly
        for path in sorted(self._directory.glob(self.pattern)):
            claimed = path.with_suffix(f".replaying-{os.getpid()}")
            try:
                path.rename(claimed)
            except FileNotFoundError:
                continue  # another worker claimed it
            rows = [orjson.loads(line) for line in claimed.read_bytes().splitlines() if line]
            if await write(rows):
                claimed.unlink()
                replayed.append((path, len(rows)))
            else:
                claimed.rename(path)
        return replayed


Finished = TypeVar("Finished")


async def finish_within(
    finish: Coroutine[Any, Any, Finished],
    writing: Callable[[], asyncio.Task[None] | None],
    seconds: float | None,
) -> asyncio.Future[Finished] | None:
    """``finish`` (a book's last write) given at most ``seconds``: its done future, or
    ``None`` when the time ran out, after cancelling it and the write still in flight
    (``writing()``), so that a hung database never holds a shutdown; what was not
    confirmed is then the caller's to spill."""
    finishing = asyncio.ensure_future(finish)
    done, _ = await asyncio.wait({finishing}, timeout=seconds)
    if done:
        return finishing
    finishing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await finishing
    task = writing()
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return None
