"""The demo's engines as child processes: started on private loopback ports, waited for,
and stopped with the gateway.

Each child runs in a session of its own (a Ctrl-C at the terminal reaches only the
gateway, which then stops it), and on Linux asks the kernel for SIGTERM when its parent
dies, so even a gateway killed with SIGKILL leaves no engine behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

PR_SET_PDEATHSIG = 1
SIGTERM = 15
STOP_SECONDS = 10.0


class ChildFailed(RuntimeError):
    """A child exited or did not answer in time; the message ends with its log's tail."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _die_with_parent() -> None:  # runs in the child, between fork and exec
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, SIGTERM)


class Child:
    """One engine process serving ``http://127.0.0.1:<port>/v1``; ``wait_ready`` polls
    ``health_path`` until it answers 200."""

    def __init__(
        self, name: str, command: list[str], log: Path, port: int, health_path: str
    ) -> None:
        self.name = name
        self.log = log
        self.v1 = f"http://127.0.0.1:{port}/v1"
        self.health_url = f"http://127.0.0.1:{port}{health_path}"
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 (no threads yet at this point)
            )

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ChildFailed(self._failure(f"exited with status {self.process.returncode}"))
            if _answers(self.health_url):
                return
            time.sleep(0.25)
        raise ChildFailed(self._failure(f"did not answer within {timeout:g} s"))

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it is still there after ``STOP_SECONDS``."""
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=STOP_SECONDS)

    def _failure(self, what: str) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()[-15:]
        except OSError:
            lines = []
        return f"{self.name} {what} (log {self.log}):\n" + "\n".join(lines)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False
