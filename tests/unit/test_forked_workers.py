"""A worker forked by the supervisor is waited for and stopped like a ``subprocess.Popen``:
its exit status, or minus the signal that ended it, whichever of ``poll`` and ``wait``
reaps it (the stop handler polls while the supervisor waits)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from parley.cli.supervisor import (
    POSTGRES_MODULES,
    REDIS_MODULES,
    WORKER_MODULES,
    Forked,
    forks,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def child(code: int, seconds: float = 0.0) -> Forked:
    pid = os.fork()
    if pid == 0:
        time.sleep(seconds)
        os._exit(code)
    return Forked(pid)


def test_wait_gives_the_exit_status() -> None:
    assert child(3).wait() == 3


def test_a_stopped_worker_reads_minus_the_signal() -> None:
    worker = child(0, seconds=30)
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait() == -signal.SIGTERM
    worker.send_signal(signal.SIGTERM)  # already reaped: nothing is sent, nothing fails


def test_a_worker_reaped_by_poll_is_still_waited_for() -> None:
    worker = child(5)
    deadline = time.monotonic() + 10
    while worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.wait() == 5


def test_workers_fork_on_linux_from_one_thread() -> None:
    """As the supervisor asks, in a fresh interpreter (a test run may have threads)."""
    asked = "from parley.cli.supervisor import forks; print(forks())"
    done = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, check=True)
    assert done.stdout.split() == [str(sys.platform.startswith("linux"))], done.stderr


def test_no_fork_beside_another_thread() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not forks()
    finally:
        stop.set()
        other.join()


def test_every_module_the_supervisor_preloads_imports() -> None:
    """A module renamed or moved fails here, not as a worker that shares less."""
    names = (*WORKER_MODULES, *REDIS_MODULES, *POSTGRES_MODULES)
    asked = f"import importlib; [importlib.import_module(n) for n in {names!r}]"
    subprocess.run([sys.executable, "-c", asked], check=True)
