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
spreads the connections). On a SQLite file it also starts the host writer, the one
process that writes every worker's usage records (``parley/store/usage_host.py``), once
the workers are forked (a fork must come from a process of one thread, and the writer
has a thread that watches it), and closes its standard input, which ends it, once the
last worker exited. ``multiprocessing`` did the same with more: it also runs a
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
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
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
"""What a worker imports with a ``redis`` section (shared limits, breakers), with Parley's
Redis client (``parley.resp``)."""
SQLITE_MODULES = ("parley.store.sql",)
"""What a worker on a SQLite file imports only when first asked for more than serving
(the admin API, files, batch lines, voice clones: ``store/sqlite_serving.py``): imported
here, SQLAlchemy's pages are shared by every worker, and one that never uses it copies
none of them; left to the worker, its first admin call would load all of it privately."""
POSTGRES_MODULES = (
    "asyncpg",
    "sqlalchemy.dialects.postgresql.asyncpg",
    "parley.store.database_async",
)
"""What a worker on PostgreSQL imports: the driver and SQLAlchemy's asyncio layer."""
HOST_WRITER_MAIN = (
    "import json, sys\n"
    "setup = json.loads(sys.stdin.readline())\n"
    "sys.path[:] = setup['path']\n"
    "from parley.telemetry.logs import configure_logging\n"
    "configure_logging(setup['host'].pop('log_format'))\n"
    "from parley.store.usage_host import serve_host\n"
    "serve_host(**setup['host'])\n"
)
"""What the host writer runs: read its setup, then write until standard input closes."""
HOST_READY_SECONDS = 15.0
"""How long the host writer has to listen; without it the workers write their own."""
HOST_RESTART_SECONDS = 1.0
"""How long after it exited the host writer is started again."""
HOST_EXIT_SECONDS = 15.0
"""How long it has to answer the workers' last batches and exit, once they exited."""


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
    host = _host_writer(settings, count)
    if host is not None:
        setup["host"] = host
        raw["usage"]["host_socket"] = host["socket_path"]
    data = json.dumps(setup).encode()
    if sys.platform != "win32":
        pipe = _filled_pipe(data)
        if pipe is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(sys.executable, [sys.executable, "-c", SUPERVISOR_MAIN, str(pipe)])
    sys.exit(supervise(setup))


def _host_writer(settings: Any, count: int) -> dict[str, Any] | None:
    """The host writer's setup, when ``count`` workers share a SQLite file and
    ``usage.host_writer`` is on: the file, and a socket in a folder of the server's user."""
    from parley.store.plain import SQLITE_BUSY_TIMEOUT_MS, SQLITE_PRAGMAS, sqlite_file
    from parley.store.usage_sqlite import supported

    database = sqlite_file(settings.database.url)
    if count < 2 or database is None or not settings.usage.host_writer:
        return None
    if sys.platform == "win32" or not supported():  # no Unix sockets; an old SQLite
        return None
    folder = tempfile.mkdtemp(prefix="parley-usage-")  # mode 0700
    return {
        "database": database,
        "socket_path": os.path.join(folder, "writer.sock"),
        "pragmas": list(SQLITE_PRAGMAS),
        "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
        "log_format": settings.server.log_format,
    }


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
    # Started once the workers are (they serve meanwhile, writing their own usage: the
    # ``usage_host`` fallback) and the stop signals are forwarded: a stop while it starts
    # ends the workers, then it.
    host = UsageWriterProcess(setup) if setup.get("host") else None
    codes = [worker.wait() for worker in workers]
    if host is not None:
        host.stop()
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
    url = str(settings.get("database", {}).get("url", ""))
    names += POSTGRES_MODULES if url.startswith("postgres") else SQLITE_MODULES
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


class UsageWriterProcess:
    """The host writer for the workers' whole life: started again, a second after it
    exited, until ``stop`` (meanwhile the workers write their own usage)."""

    def __init__(self, setup: dict[str, Any]) -> None:
        self._setup = setup
        self._lock = threading.Lock()
        self._stopping = False
        self.process = _start_host(setup)
        threading.Thread(target=self._watch, name="parley-usage-writer", daemon=True).start()

    def _watch(self) -> None:
        while (process := self.process) is not None:
            code = process.wait()
            time.sleep(HOST_RESTART_SECONDS)
            with self._lock:
                if self._stopping:
                    return
                print(
                    f"parley: the usage writer exited ({code}); starting it again", file=sys.stderr
                )
                self.process = _start_host(self._setup)

    def stop(self) -> None:
        """End it once the workers are gone, and remove its folder."""
        with self._lock:
            self._stopping = True
        _stop_host(self.process, self._setup["host"]["socket_path"])


def _start_host(setup: dict[str, Any]) -> subprocess.Popen[bytes] | None:
    """The host writer, listening; None (the workers then write their own usage) when it
    did not start within ``HOST_READY_SECONDS``."""
    line = json.dumps({"path": setup["path"], "host": setup["host"]}) + "\n"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST_WRITER_MAIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert host.stdin is not None and host.stdout is not None  # both PIPE
    host.stdin.write(line.encode())
    host.stdin.flush()
    ready, _, _ = select.select([host.stdout], [], [], HOST_READY_SECONDS)
    if ready and host.stdout.readline() == b"ready\n":
        return host
    print("parley: the usage writer did not start; each worker writes its own", file=sys.stderr)
    host.kill()
    host.wait()
    return None


def _stop_host(host: subprocess.Popen[bytes] | None, socket_path: str) -> None:
    """End the host writer (closing its standard input) once the workers are gone, and
    remove its folder."""
    if host is not None and host.stdin is not None:
        host.stdin.close()
        try:
            host.wait(HOST_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            host.kill()
            host.wait()
    shutil.rmtree(os.path.dirname(socket_path), ignore_errors=True)


def _start(line: str) -> subprocess.Popen[bytes]:
    worker = subprocess.Popen([sys.executable, "-c", WORKER_MAIN], stdin=subprocess.PIPE)
    if worker.stdin is not None:  # always, with stdin=PIPE
        worker.stdin.write(line.encode())
        worker.stdin.close()
    return worker
