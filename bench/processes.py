"""Starting the benchmark's processes, waiting for them, and always stopping them."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
STOP_SECONDS = 15.0


class BenchError(Exception):
    """The benchmark cannot go on; the message says why."""


@dataclass
class Service:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def clean_environment() -> dict[str, str]:
    """The environment without PARLEY_* overrides, which would change what is measured."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}


@dataclass(frozen=True)
class Placement:
    """Which CPUs the relays under test run on, and which the upstream and load generator."""

    servers: frozenset[int] | None = None
    helpers: frozenset[int] | None = None

    @classmethod
    def split(cls) -> Placement:
        """The first CPU for the relay being measured, the others for everything else, so
        that the relay's share of a core is its own and not what the others leave it."""
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(cpus) < 2:
            return cls()
        return cls(frozenset(cpus[:1]), frozenset(cpus[1:]))

    def describe(self) -> str:
        if self.servers is None or self.helpers is None:
            return "not pinned"
        return f"relays on CPU {_cpus(self.servers)}, upstream and client on {_cpus(self.helpers)}"


def _cpus(cpus: frozenset[int]) -> str:
    return ",".join(str(cpu) for cpu in sorted(cpus))


def pin(pid: int, cpus: frozenset[int] | None) -> None:
    """Keep a process just started on ``cpus``: done before its interpreter is up, so the
    threads it starts later inherit the setting."""
    if cpus is not None:
        os.sched_setaffinity(pid, cpus)


def cpu_list(cpus: frozenset[int] | None) -> list[str]:
    """``--cpus`` for the load generator, which pins itself."""
    return [] if cpus is None else ["--cpus", ",".join(str(cpu) for cpu in sorted(cpus))]


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


class Services:
    """Every process started here; leaving the ``with`` block stops them all, in reverse."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[Service] = []
        self.handed_out: set[int] = set()

    def free_port(self) -> int:
        """A free port that this set of services has not handed out before.

        A process started here binds its port only some time after ``start`` returns, so
        the kernel may offer that port again to the next ``free_ports`` call; remembering
        every port given out keeps two services from being told the same one.
        """
        while True:
            (port,) = free_ports(1)
            if port not in self.handed_out:
                self.handed_out.add(port)
                return port

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *exc: object) -> None:
        for service in reversed(self.started):
            stop(service.process)

    def start(
        self,
        name: str,
        port: int,
        args: Sequence[str],
        *,
        cwd: Path = REPO,
        cpus: frozenset[int] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Service:
        """Start ``python args`` in ``cwd``; on ``cpus`` only, when given (Linux); ``env``
        added to the environment."""
        log = self.workdir / f"{name}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, *args],
                cwd=cwd,
                env=clean_environment() | dict(env or {}),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches only us; we stop them in order
            )
        pin(process.pid, cpus)
        service = Service(name, process, port, log)
        self.started.append(service)
        return service

    def stop(self, service: Service) -> int | None:
        """Stop one service now (SIGTERM, then SIGKILL); its exit code."""
        code = stop(service.process)
        self.started.remove(service)
        return code


def stop(process: subprocess.Popen[bytes]) -> int | None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def wait_until_ready(service: Service, path: str | None = None, seconds: float = 30.0) -> None:
    """Until the port answers (and ``GET path`` is 200, if given), or raise with its log."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise BenchError(
                f"{service.name} exited with {service.process.returncode}:\n{service.log_tail()}"
            )
        if _answers(service.port, path):
            return
        time.sleep(0.1)
    raise BenchError(f"{service.name} was not ready after {seconds:g} s:\n{service.log_tail()}")


def _answers(port: int, path: str | None) -> bool:
    try:
        if path is None:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            connection.request("GET", path)
            return connection.getresponse().status == 200
        finally:
            connection.close()
    except OSError:
        return False


def run_in(workdir: Path, keep: bool, work: Callable[[], T]) -> T:
    """``work()``'s report, ending the bench with one line instead of a traceback on a
    ``BenchError`` or an interrupt (Ctrl-C, or SIGTERM: ``sigterm_as_interrupt``), and
    removing ``workdir`` afterwards unless ``keep``."""
    try:
        with sigterm_as_interrupt():
            return work()
    except BenchError as error:
        sys.exit(f"bench: {error}")
    except KeyboardInterrupt:
        sys.exit("bench: interrupted; every process is stopped")
    finally:
        if keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """So ``kill <bench pid>`` cleans up like Ctrl-C does."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
