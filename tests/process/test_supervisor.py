"""``serve --workers 2``: the parent runs no helper process of its own, only the two
workers, and is still the process a service manager started. It forks them from itself
after importing the web stack, so most of a worker's memory is the supervisor's pages,
shared; the supervisor itself serves nothing and runs one thread."""

from __future__ import annotations

from pathlib import Path

from tests.process.calls import gateway_config
from tests.process.procs import Processes

HEAVY = ("aiohttp", "pydantic_core", "sqlalchemy", "uvloop", "orjson")
"""Compiled modules of the web stack: their files appear in a process's memory map."""


def children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in found]


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


def test_the_supervisor_forks_its_workers_and_serves_nothing(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    config = gateway_config(engine, tmp_path, limits={"per_worker": True})
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
