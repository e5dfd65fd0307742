"""``serve --workers 2``: the parent runs no helper process of its own, only the two
workers and, on a SQLite file, the host's one usage writer, and is still the process a
service manager started. It forks the workers from itself after importing the web stack,
so most of a worker's memory is the supervisor's pages, shared; the supervisor itself
serves nothing. The workers' calls are metered through the usage writer, which ends
after them and leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import tempfile
import time
from pathlib import Path

from tests.process.calls import Chat, burst, gateway_config
from tests.process.procs import Processes

HEAVY = ("aiohttp", "pydantic_core", "sqlalchemy", "uvloop", "orjson")
"""Compiled modules of the web stack: their files appear in a process's memory map."""


def children(pid: int) -> list[int]:
    """Every thread's children (the usage writer started again is its watcher thread's)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return sorted(found)


def mapped_files(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def memory_kb(pid: int) -> dict[str, int]:
    """``/proc/<pid>/smaps_rollup``: the resident set and its shares, in kB."""
    lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    return {name: int(value.split()[0]) for name, value in (line.split(":") for line in lines)}


def threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def listening_inodes(pid: int) -> set[str]:
    """The inodes of the TCP sockets ``pid`` has open that listen (state 0A)."""
    listening = {
        fields[9]
        for table in ("/proc/net/tcp", "/proc/net/tcp6")
        for fields in (line.split() for line in Path(table).read_text().splitlines()[1:])
        if fields[3] == "0A"
    }
    links = (link.readlink().as_posix() for link in Path(f"/proc/{pid}/fd").iterdir())
    return {link[8:-1] for link in links if link.startswith("socket:[")} & listening


def open_files(pid: int) -> list[str]:
    found = []
    for link in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            found.append(os.readlink(link))
    return found


def test_the_supervisor_forks_its_workers_and_serves_nothing(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    config = gateway_config(
        engine, tmp_path, limits={"per_worker": True}, usage={"host_writer": False}
    )
    server = procs.serve(config, args=("--workers", "2"), wait=False)
    server.wait_ready()
    workers = children(server.pid)
    assert len(workers) == 2  # no resource tracker beside them
    parent = mapped_files(server.pid)
    assert [name for name in HEAVY if name not in parent] == []  # imported, to be shared
    assert threads(server.pid) == 1
    assert listening_inodes(server.pid) == set()
    for worker in workers:
        assert "aiohttp" in mapped_files(worker)
        assert children(worker) == []
        memory = memory_kb(worker)
        # Forked after the imports: a good part of what it holds is shared with the
        # supervisor and the other worker (a worker that imported everything itself
        # shares only its libraries' files, about a quarter).
        shared = memory["Shared_Clean"] + memory["Shared_Dirty"]
        assert shared > 0.4 * memory["Rss"], memory
    assert server.terminate() == 0


def test_on_a_sqlite_file_one_process_writes_every_workers_usage(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    database = tmp_path / "parley.db"
    config = gateway_config(engine, tmp_path, limits={"per_worker": True})
    # a temporary folder of this server's own, which another test's server cannot share
    # (and short: the socket's path must fit in 108 bytes)
    private = Path(tempfile.mkdtemp(prefix="sup-"))
    server = procs.serve(config, args=("--workers", "2"), wait=False, env={"TMPDIR": str(private)})
    server.wait_ready()
    folders = set(private.glob("parley-usage-*"))
    assert len(folders) == 1, "the usage writer's socket is in a folder of its own"
    folder = folders.pop()
    deadline = time.monotonic() + 20  # started once the workers are forked
    while not (folder / "writer.sock").is_socket():
        assert time.monotonic() < deadline, "the usage writer never listened"
        time.sleep(0.1)
    assert folder.stat().st_mode & 0o077 == 0, "only the server's user may connect"
    processes = children(server.pid)
    assert len(processes) == 3
    hosts = [pid for pid in processes if "aiohttp" not in mapped_files(pid)]
    assert len(hosts) == 1, "one child, the usage writer, holds no web stack"
    host = hosts[0]
    key = server.create_key()
    replies = burst([Chat(server.v1, key) for _ in range(40)], concurrency=8)
    assert [reply.status for reply in replies] == [200] * 40
    deadline = time.monotonic() + 10
    while str(database) not in open_files(host):  # opened at its first batch
        assert time.monotonic() < deadline, "the usage writer never opened the database"
        time.sleep(0.1)
    assert server.terminate() == 0
    assert not Path(f"/proc/{host}").exists()
    assert not folder.exists()
    private.rmdir()  # nothing else was left in it
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM usage_records").fetchone() == (40,)
        assert conn.execute("SELECT sum(requests) FROM usage_daily").fetchone() == (40,)
    assert "did not answer" not in server.output()


def usage_writers(server_pid: int) -> list[int]:
    return [pid for pid in children(server_pid) if "aiohttp" not in mapped_files(pid)]


def test_with_the_usage_writer_gone_the_workers_write_their_own_until_it_is_back(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    """SIGKILL to the usage writer: the calls are still served and each metered once, the
    workers writing their batches themselves until the supervisor has started it again,
    and the server still stops cleanly."""
    database = tmp_path / "parley.db"
    config = gateway_config(engine, tmp_path, limits={"per_worker": True})
    server = procs.serve(config, args=("--workers", "2"), wait=False)
    server.wait_ready()
    (host,) = usage_writers(server.pid)
    key = server.create_key()
    before = burst([Chat(server.v1, key) for _ in range(10)])
    assert [reply.status for reply in before] == [200] * 10
    os.kill(host, signal.SIGKILL)
    replies = burst([Chat(server.v1, key) for _ in range(30)], concurrency=8)
    assert [reply.status for reply in replies] == [200] * 30
    deadline = time.monotonic() + 20
    while len(again := [pid for pid in usage_writers(server.pid) if pid != host]) != 1:
        assert time.monotonic() < deadline, server.failure("did not start the usage writer again")
        time.sleep(0.2)
    replies = burst([Chat(server.v1, key) for _ in range(30)], concurrency=8)
    assert [reply.status for reply in replies] == [200] * 30
    while str(database) not in open_files(again[0]):  # writing again, at its first batch
        assert time.monotonic() < deadline + 10, "the new usage writer never wrote"
        replies = burst([Chat(server.v1, key)])
        assert replies[0].status == 200
        time.sleep(0.5)
    assert server.terminate() == 0
    with sqlite3.connect(database) as conn:
        (count,) = conn.execute("SELECT count(*) FROM usage_records").fetchone()
        assert count >= 70
        assert conn.execute("SELECT sum(requests) FROM usage_daily").fetchone() == (count,)
    assert "this worker writes its own" in server.output()
    assert "starting it again" in server.output()
