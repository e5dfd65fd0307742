"""``parley serve --workers 2``: a channel added through the admin API (answered by one
worker) reaches the other worker within the refresh interval, and its disabling too.

Calls go through the shared port, each on a fresh connection, so the kernel spreads
them over both workers; the per-worker evidence is each worker's own metrics file
(prometheus-client's multiprocess mode writes one per process id), read one worker at
a time: both workers served the new channel's model."""

from __future__ import annotations

import asyncio
import glob
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from cryptography.fernet import Fernet
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from tests.process.calls import Chat, call, gateway_config
from tests.process.procs import Processes, Server, eventually

ADMIN = "admin-token-for-workers-0123456789"
SPARE = "spare-model"
REFRESH_SECONDS = 1.0
CALLS = 40
"""Calls on fresh connections: both workers take some (all on one: about 1 in 10^12)."""


def admin_call(server: Server, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async def run() -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                method,
                f"{server.base_url}/admin{path}",
                json=body,
                headers={"Authorization": f"Bearer {ADMIN}"},
            ) as reply,
        ):
            return reply.status, await reply.json()

    return asyncio.run(run())


def served_by_worker(folder: str, model: str) -> dict[int, float]:
    """Each worker's calls to ``model`` answered 200, from its own metrics files."""
    found: dict[int, float] = {}
    for path in glob.glob(f"{folder}/*.db"):
        match = re.search(r"_(\d+)\.db$", path)
        if match is None:
            continue
        pid = int(match.group(1))
        with tempfile.TemporaryDirectory() as alone:
            shutil.copy(path, alone)
            registry = CollectorRegistry()
            MultiProcessCollector(registry, path=alone)
            value = registry.get_sample_value(
                "parley_requests_total", {"model": model, "status": "200"}
            )
        found[pid] = found.get(pid, 0.0) + (value or 0.0)
    return found


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[1])


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def workers_of(server: Server) -> list[int]:
    """The supervisor's children that serve (not the host's usage writer)."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        pid = int(stat.split("/")[2])
        try:
            # forked workers have the supervisor's command line; the writer names its own
            if parent_of(pid) == server.pid and b"serve_host" not in cmdline(pid):
                found.append(pid)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return sorted(found)


def metrics_folder(pid: int) -> str:
    """The shared metrics folder a worker was given (its environment)."""
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    (folder,) = [v for v in environ if v.startswith(b"PROMETHEUS_MULTIPROC_DIR=")]
    return folder.partition(b"=")[2].decode()


def statuses(chat: Chat, count: int) -> list[int]:
    return [call(chat).status for _ in range(count)]


def test_a_channel_added_live_reaches_every_worker_within_the_refresh(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    config = gateway_config(
        engine,
        tmp_path,
        limits={"cache_refresh_seconds": REFRESH_SECONDS, "per_worker": True},
        admin={"token": ADMIN, "secret_keys": [Fernet.generate_key().decode()]},
    )
    config["models"].append({"name": SPARE, "kind": "chat"})
    server = procs.serve(config, args=("--workers", "2"), wait=False)
    key = server.create_key()
    server.wait_ready()
    pids = workers_of(server)
    assert len(pids) == 2, pids
    (folder,) = {metrics_folder(pid) for pid in pids}
    ask = Chat(server.v1, key, model=SPARE)
    assert set(statuses(ask, 10)) == {503}  # no channel serves it yet, on either worker

    channel = {
        "name": "added-live",
        "base_url": engine,
        "api_key": "sk-live-credential-0123456789",
        "models": [{"name": SPARE, "upstream": "upstream-spare"}],
    }
    status, created = admin_call(server, "POST", "/channels", channel)
    assert status == 201, created
    added = time.monotonic()
    eventually(lambda: set(statuses(ask, 10)) == {200}, "the channel on both workers", 10)
    took = time.monotonic() - added
    assert took < REFRESH_SECONDS * 2 + 1, took
    replies = [call(ask) for _ in range(CALLS)]
    assert {reply.status for reply in replies} == {200}
    assert {reply.json()["model"] for reply in replies} == {SPARE}

    def both_served() -> bool:
        counts = served_by_worker(folder, SPARE)
        return len([n for n in counts.values() if n > 0]) == 2

    def all_counted() -> bool:  # each worker moves its calls into the series once a second
        return sum(served_by_worker(folder, SPARE).values()) >= CALLS + 10

    eventually(both_served, "both workers' metrics show the new channel's calls", 10)
    eventually(all_counted, "every call in the workers' metrics", 5)
    workers = served_by_worker(folder, SPARE)
    assert sorted(workers) == pids, workers

    status, _ = admin_call(server, "POST", "/channels/added-live/disable")
    assert status == 200
    disabled = time.monotonic()
    eventually(lambda: set(statuses(ask, 10)) == {503}, "the disabling on both workers", 10)
    assert time.monotonic() - disabled < REFRESH_SECONDS * 2 + 1
    assert set(statuses(ask, CALLS)) == {503}

    assert server.terminate() == 0
    assert "Traceback" not in server.output()
    assert "sk-live-credential" not in server.output()
