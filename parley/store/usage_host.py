"""One usage writer for the host: ``serve --workers N`` on a SQLite file.

A SQLite file has one write lock. When every worker writes its own usage batches, the
workers take turns at it, and a worker at full load holds it longer than its write
needs: its writer's thread waits for the GIL, which the busy event loop holds, between
one statement and the next, while the other workers' writers sleep in SQLite's busy
wait, whose naps grow longer the longer they wait, so eight loaded workers fall behind
(docs/performance.md, Eight workers on one SQLite file). So with more than one worker on
a SQLite file the supervisor starts one more process, the **host writer**
(``serve_host``): the one connection that writes usage records, on an event loop of its
own with nothing else to do. Each worker's store sends it each batch over a Unix socket
(``HostUsageClient``) and is answered once the batch is committed, so the worker's
``UsageWriter`` (its queue, retries, spill and the budget ledger) works as it does with
any store: the host writer is where ``record_usage`` runs, nothing more.

The worker keeps its own writer (``SqliteUsageWriter``) and writes through it whenever
the host writer cannot be reached or does not answer within the store's timeout (not
started, gone, stuck): the batch is then written directly, as without a host writer. A
batch whose answer was lost may have been committed by the host writer too; the store
ignores a record it already has (by ``request_id``), so it is counted once either way.

The supervisor starts a host writer that exited again, a second later
(``cli/supervisor.py``). It ignores SIGTERM and SIGINT (a terminal's Ctrl-C and
systemd's stop reach every process of the service at once, and it must outlive the
workers' last writes) and ends when the supervisor closes its standard input, after the
last worker exited, or when the supervisor is gone. The socket is in a folder only the
server's user can open.

A request is a 4-byte big-endian length and the batch as JSON (``encode``); the answer
is framed alike: ``{"written": n}``, or ``{"error": kind, "reason": text}`` where kind
``sqlite`` comes with sqlite3's result code, which the worker maps to a ``StoreError`` as
it maps its own write's, and ``fault`` is any other failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import operator
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson

from parley.domain.usage import UsageRecord
from parley.store.base import StoreError, StoreFault
from parley.store.usage_sqlite import SqliteUsageWriter

log = logging.getLogger("parley.meter")

MAX_FRAME_BYTES = 256 * 1024 * 1024
"""The largest batch the host writer reads: far above any queue (10,000 records of about
600 bytes), a bound against a stray client, not a limit a worker meets."""
READ_LIMIT = 16 * 1024 * 1024
"""The host writer's read buffer: a stream pauses its socket at twice this while a frame
is read, so it holds a whole catch-up batch, where asyncio's default would pause and
resume the socket many times a batch."""
RETRY_SECONDS = 1.0
"""After the host writer failed to answer, how long a worker writes directly before it
tries the host writer again."""
READY = b"ready\n"
"""What the host writer prints on its standard output once it listens."""


FIELDS = tuple(field.name for field in dataclasses.fields(UsageRecord))
_values = operator.attrgetter(*FIELDS)
"""A record's values in its fields' order, as one tuple (in C)."""


def encode(records: Sequence[UsageRecord]) -> bytes:
    """A request's frame: each record as a JSON array of its values in ``FIELDS`` order.
    Arrays, not objects: a third of the bytes, and read back positionally, several times
    cheaper both ways than objects (orjson's own dataclass writer, and
    ``UsageRecord(**row)``)."""
    payload = orjson.dumps([_values(record) for record in records])
    return len(payload).to_bytes(4, "big") + payload


def decode(payload: bytes) -> list[UsageRecord]:
    records = []
    for row in orjson.loads(payload):
        row[1] = datetime.fromisoformat(row[1])  # created_at
        records.append(UsageRecord(*row))
    return records


def _frame(answer: dict[str, Any]) -> bytes:
    payload = orjson.dumps(answer)
    return len(payload).to_bytes(4, "big") + payload


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = int.from_bytes(await reader.readexactly(4), "big")
    if size > MAX_FRAME_BYTES:
        raise ConnectionError(f"a frame of {size} bytes")
    return await reader.readexactly(size)


class HostUsageClient:
    """A worker's ``record_usage`` on a SQLite file: through the host writer, else its own
    writer (``direct``). One call at a time (the ``UsageWriter`` never overlaps two)."""

    def __init__(self, socket_path: str, direct: SqliteUsageWriter, timeout: float) -> None:
        self._socket_path = socket_path
        self._direct = direct
        self._timeout = timeout
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._retry_at = 0.0
        self._away = False
        self.through_host = 0
        """Batches the host writer wrote (the rest were written directly)."""

    async def record_usage(self, records: Sequence[UsageRecord]) -> int:
        if records and time.monotonic() >= self._retry_at:
            try:
                async with asyncio.timeout(self._timeout):
                    written = await self._ask(records)
            except (OSError, EOFError, TimeoutError, ValueError) as error:
                self._drop()
                self._retry_at = time.monotonic() + RETRY_SECONDS
                if not self._away:  # once an outage, not at every try
                    log.warning(
                        "the host's usage writer did not answer (%s); this worker writes its own",
                        type(error).__name__,
                    )
                self._away = True
            else:
                if self._away:
                    log.info("the host's usage writer answers again")
                self._away = False
                self.through_host += 1
                return written
        return await self._direct.record_usage(records)

    async def _ask(self, records: Sequence[UsageRecord]) -> int:
        if self._streams is None:
            self._streams = await asyncio.open_unix_connection(self._socket_path)
        reader, writer = self._streams
        try:
            writer.write(encode(records))
            await writer.drain()
            answer = orjson.loads(await _read_frame(reader))
        except BaseException:
            self._drop()  # cut off mid-request: what comes next on it is not ours
            raise
        if "written" in answer:
            return int(answer["written"])
        raise _failure(answer)

    def _drop(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None

    async def close(self) -> None:
        self._drop()
        await self._direct.close()


def _failure(answer: dict[str, Any]) -> StoreError:
    """The store's error for the host writer's answer, as the worker's own write would
    have raised it: sqlite3's result code decides (``store/boundary.py``)."""
    from parley.store.boundary import store_error  # loaded in a worker; not in the host

    reason = str(answer.get("reason", "the host's usage writer failed"))
    if answer.get("error") != "sqlite":
        return StoreFault(reason)
    error = sqlite3.OperationalError(reason)
    error.sqlite_errorcode = answer.get("code")  # type: ignore[assignment]
    return store_error(error)


class HostWriter:
    """The host writer's server: one ``SqliteUsageWriter``, any number of workers."""

    def __init__(self, writer: SqliteUsageWriter) -> None:
        self._writer = writer
        self._idle: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        """Handlers waiting for their worker's next batch, and their connections."""
        self._busy: set[asyncio.Task[None]] = set()
        """Handlers writing a batch, or answering."""
        self._closing = False

    async def handle(self, reader: asyncio.StreamReader, stream: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # a handler is always a task
        try:
            while not self._closing:
                self._idle[task] = stream
                payload = await _read_frame(reader)
                del self._idle[task]
                self._busy.add(task)
                stream.write(_frame(await self._answer(payload)))
                await stream.drain()
                self._busy.discard(task)
        except (EOFError, ConnectionError):
            pass  # the worker closed its end: it exited, or gave up on an answer
        finally:
            self._idle.pop(task, None)
            self._busy.discard(task)
            stream.close()

    async def _answer(self, payload: bytes) -> dict[str, Any]:
        try:
            return {"written": await self._writer.record_decoded(payload, decode)}
        except Exception as error:  # every failure is answered, none ends the server
            lines = str(error).strip().splitlines()  # never the statement or its values
            reason = lines[0] if lines else type(error).__name__
            log.error("usage records could not be written (%s)", reason)
            if isinstance(error, sqlite3.Error):
                code = getattr(error, "sqlite_errorcode", None)
                return {"error": "sqlite", "code": code, "reason": reason}
            return {"error": "fault", "reason": reason}

    async def finish(self, seconds: float) -> None:
        """Hang up on the workers still connected, once each has its answer to the batch it
        sent (``seconds`` at most), then close: a worker writes what it still has itself."""
        self._closing = True
        waiting = self._busy | set(self._idle)
        for stream in self._idle.values():
            stream.close()  # its handler reads the end of the stream, and returns
        if waiting:
            await asyncio.wait(waiting, timeout=seconds)
        await self._writer.close()


def serve_host(
    database: str,
    socket_path: str,
    pragmas: Sequence[str],
    timeout: float,
) -> None:
    """The host writer's process: write usage into ``database`` for whoever connects to
    ``socket_path`` until standard input is closed (its logging is set by its caller,
    ``cli/supervisor.py``: the store stays below telemetry)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    asyncio.run(_serve(SqliteUsageWriter(database, pragmas, timeout), socket_path, timeout))


async def _serve(writer: SqliteUsageWriter, socket_path: str, finish_seconds: float) -> None:
    host = HostWriter(writer)
    server = await asyncio.start_unix_server(host.handle, path=socket_path, limit=READ_LIMIT)
    os.chmod(socket_path, 0o600)
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()
    # until the supervisor closes the pipe (after the workers), or is gone
    await asyncio.to_thread(sys.stdin.buffer.read)
    server.close()
    with contextlib.suppress(OSError):
        os.unlink(socket_path)
    await host.finish(finish_seconds)
