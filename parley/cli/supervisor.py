"""``parley serve --workers N``: the parent that starts N serving processes and stops them.

By the time the command has checked the configuration, the channels and the database, it
holds what checking loaded and left behind. So ``run_workers`` hands over to a fresh
interpreter in the same process (``exec``: same pid, so a service manager sees no change)
that runs ``supervise`` and gets the settings through a pipe. On Linux the supervisor
imports what a worker serves with (``preload``: the web stack, the gateway, the store),
moves it out of the garbage collector's reach and forks the workers from itself: their
imported modules are the supervisor's pages, shared copy-on-write, so each further worker
costs mostly its own data (docs/performance.md, Memory). The supervisor serves nothing,
opens nothing and starts no thread before forking. Elsewhere it starts each
worker as a fresh interpreter (``subprocess``), handing it the settings on its standard
input (never on a command line, where any user could read the secrets). Either way it
forwards SIGTERM and SIGINT, waits, and removes the metrics folder the workers shared.
The workers share the port with ``SO_REUSEPORT`` (each binds its own socket; the kernel
spreads the connections). ``multiprocessing`` did the same with more: it also runs a
resource-tracker process for the whole life of the server.

When the settings do not fit in a pipe's buffer (they never should: a few KB), or on a
system without ``exec`` of this kind, the same loop runs in the calling process.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import traceback
from types import FrameType
from typing import Any, Protocol

METRICS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
"""Set by ``telemetry/workers.shared_metrics`` to the folder made for these workers."""
WORKER_MAIN = (
    "import json, sys\n"
    "setup = json.loads(sys.stdin.readline())\n"
    "sys.stdin.close()\n"
    "sys.path[:] = setup['path']\n"
    "from parley.cli.serve import run_worker\n"
    "run_worker(setup['settings'], reuse_port=True)\n"
)
"""What each worker runs: read the settings, then serve (``parley/cli/serve.py``)."""
SUPERVISOR_MAIN = (
    "import json, os, sys\n"
    "with os.fdopen(int(sys.argv[1]), 'rb') as pipe:\n"
    "    setup = json.loads(pipe.read())\n"
    "sys.path[:] = setup['path']\n"
    "from parley.cli.supervisor import supervise\n"
    "sys.exit(supervise(setup))\n"
)
"""What the parent becomes: read the setup from the pipe, then ``supervise``."""
WORKER_MODULES = ("uvloop", "parley.cli.serve")
"""What every worker serves with: the event loop, the web stack, the gateway, the store."""
REDIS_MODULES = ("parley.limits.shared", "parley.runtime.shared_breakers")
"""What a worker imports with a ``redis`` section (shared limits, breakers): redis-py."""
POSTGRES_MODULES = (
    "asyncpg",
    "sqlalchemy.dialects.postgresql.asyncpg",
    "parley.store.database_async",
)
"""What a worker on PostgreSQL imports: the driver and SQLAlchemy's asyncio layer."""


def run_workers(settings: Any, count: int) -> None:
    """``count`` serving processes sharing the port, until a signal; exits with their
    status. ``settings`` is ``parley.settings.Settings`` (not imported here)."""
    raw = settings.model_dump(mode="json")
    folder = raw.get("metrics", {}).get("multiprocess_dir")
    setup = {
        "path": sys.path,
        "settings": raw,
        "count": count,
        "remove": folder if folder and os.environ.get(METRICS_VARIABLE) == folder else None,
    }
    data = json.dumps(setup).encode()
    if sys.platform != "win32":
        pipe = _filled_pipe(data)
        if pipe is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, [sys.executable, "-c", SUPERVISOR_MAIN, str(pipe)])
    sys.exit(supervise(setup))


def _filled_pipe(data: bytes) -> int | None:
    """The read end of a pipe already holding ``data`` (inherited across ``exec``), or
    None when ``data`` does not fit in its buffer."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        written = os.write(write, data)
    except BlockingIOError:
        written = 0
    os.close(write)
    if written != len(data):
        os.close(read)
        return None
    os.set_inheritable(read, True)
    return read


class Worker(Protocol):
    """A started worker, as ``subprocess.Popen`` and ``Forked`` both are."""

    def poll(self) -> int | None: ...

    def send_signal(self, signum: int, /) -> None: ...

    def wait(self) -> int: ...


def supervise(setup: dict[str, Any]) -> int:
    """Start the workers, forward the stop signals, wait; the exit status."""
    each = worker_settings(setup["settings"], setup["count"])
    workers: list[Worker]
    if forks():
        preload(setup["settings"])
        workers = [_fork(settings) for settings in each]
    else:
        workers = [
            _start(json.dumps({"path": setup["path"], "settings": settings}) + "\n")
            for settings in each
        ]

    def stop(signum: int, frame: FrameType | None) -> None:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    codes = [worker.wait() for worker in workers]
    if setup.get("remove"):
        shutil.rmtree(setup["remove"], ignore_errors=True)
    stopped = (0, -signal.SIGTERM)
    failed = [f"parley-{index}" for index, code in enumerate(codes) if code not in stopped]
    if failed:
        print(f"parley: workers exited with errors: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def worker_settings(settings: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """Each worker's settings. On PostgreSQL every worker runs a batch lane (when
    ``batches.enabled``): the lanes share the work under their leases, as instances
    do. On SQLite the first worker runs it and the others serve the batch API only:
    one SQLite database has one lane (a lane that starts there takes every earlier one
    for gone: docs/batch.md)."""
    url = str(settings.get("database", {}).get("url", ""))
    if url.startswith("postgres"):
        return [settings] * count
    others = {**settings, "batches": {**settings.get("batches", {}), "enabled": False}}
    return [settings] + [others] * (count - 1)


def forks() -> bool:
    """Whether workers are forked from the supervisor: on Linux, from a process of one
    thread (a lock another thread held would stay held in the child). macOS's system
    libraries are not safe to use in a child forked after loading them, and Windows has
    no fork."""
    return (
        sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1
    )


def preload(settings: dict[str, Any]) -> None:
    """Import what every worker imports before it serves with ``settings``, so the forked
    workers share it, then freeze the objects made so far: a collection in a worker never
    writes to them, which would copy their pages into that worker."""
    names = list(WORKER_MODULES)
    if settings.get("redis"):
        names += REDIS_MODULES
    if str(settings.get("database", {}).get("url", "")).startswith("postgres"):
        names += POSTGRES_MODULES
    for name in names:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()


class Forked:
    """A worker forked from this process, waited for like a ``subprocess.Popen``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def wait(self) -> int:
        while self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:  # reaped meanwhile, by ``poll`` in the stop handler
                reaped = self.poll()
                if reaped is None:
                    raise
                return reaped
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _fork(settings: dict[str, Any]) -> Forked:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return Forked(pid)
    code = 1
    try:
        random.seed()  # a state of its own, not the supervisor's copy
        from parley.cli.serve import run_worker

        run_worker(settings, reuse_port=True)
        code = 0
    except SystemExit as stop:  # ``fail``: the port was taken
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # never the supervisor's own code after the fork


def _start(line: str) -> subprocess.Popen[bytes]:
    worker = subprocess.Popen([sys.executable, "-c", WORKER_MAIN], stdin=subprocess.PIPE)
    if worker.stdin is not None:  # always, with stdin=PIPE
        worker.stdin.write(line.encode())
        worker.stdin.close()
    return worker
