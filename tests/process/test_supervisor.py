"""``serve --workers 2``: the parent holds no web stack and runs no helper process of its
own, only the two workers, and is still the process a service manager started."""

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


def test_the_supervisor_is_light_and_starts_only_workers(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    config = gateway_config(engine, tmp_path, limits={"per_worker": True})
    server = procs.serve(config, args=("--workers", "2"), wait=False)
    server.wait_ready()
    workers = children(server.pid)
    assert len(workers) == 2  # no resource tracker beside them
    parent = mapped_files(server.pid)
    assert [name for name in HEAVY if name in parent] == []
    for worker in workers:
        assert "aiohttp" in mapped_files(worker)
        assert children(worker) == []
    assert server.terminate() == 0
