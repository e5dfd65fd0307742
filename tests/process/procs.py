"""Real processes for the process-level tests: ``parley serve``, the CLI, fake engines, Redis.

Everything started goes through a ``Processes`` registry, whose ``stop_all`` (called by
the ``procs`` fixture's teardown, even when the test failed) kills whatever is still
running: each process is started in a session of its own, and killed with its whole
process group (so ``serve --workers N`` leaves no worker behind). Every wait is bounded:
a process that does not start, answer or stop in time fails the test with its log's tail.

- ``procs.engine()``: ``python -m tests.upstreams.openai_compatible PORT``, a fake
  OpenAI-compatible engine; returns its ``/v1`` base URL.
- ``procs.serve(config)``: writes ``config`` (a dict, or ``None`` for no config at all)
  and runs ``python -m parley serve`` on a free port until ``GET /health`` answers.
- ``procs.redis()``: a private ``redis-server`` on a free port, saving nothing.
- ``run_cli(args, cwd)``: one ``python -m parley …`` command, its output captured.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from parley.store.sql import open_store

REPO = Path(__file__).resolve().parents[2]
START_SECONDS = 30.0
"""Generous: on a loaded 2-core machine a start (imports, migrations) can take seconds."""
STOP_SECONDS = 20.0
CLI_SECONDS = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without ``PARLEY_*`` overrides, with the repo importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env | (extra or {})


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def run_cli(
    args: list[str],
    cwd: Path,
    *,
    config: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = CLI_SECONDS,
) -> subprocess.CompletedProcess[str]:
    """``python -m parley [--config FILE] ARGS…`` in ``cwd``; stdout and stderr captured."""
    command = [sys.executable, "-m", "parley"]
    if config is not None:
        command += ["--config", str(config)]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=environment(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_ok(args: list[str], cwd: Path, *, config: Path | None = None) -> str:
    """Run a CLI command that must succeed; its stdout."""
    done = run_cli(args, cwd, config=config)
    assert done.returncode == 0, f"parley {' '.join(args)}: {done.stderr}"
    return done.stdout


@dataclass
class Proc:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        """Everything it wrote so far (stdout and stderr together)."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def failure(self, what: str) -> str:
        tail = "\n".join(self.output().splitlines()[-30:])
        return f"{self.name} {what}; its log ends:\n{tail}"

    def terminate(self, timeout: float = STOP_SECONDS) -> int:
        """SIGTERM, then wait for the exit code (SIGKILL and fail if it takes too long)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(self.failure(f"did not stop within {timeout:g}s of SIGTERM"))

    def kill(self) -> None:
        """SIGKILL to its whole process group (``serve --workers N`` has children)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=STOP_SECONDS)


@dataclass
class Server(Proc):
    """A ``parley serve`` process."""

    port: int = 0
    workdir: Path = field(default_factory=Path)
    config: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def v1(self) -> str:
        return f"{self.base_url}/v1"

    def wait_ready(self) -> None:
        wait_until(self, lambda: _healthy(self.base_url), "parley serve")

    def cli(self, args: list[str]) -> str:
        """A CLI command against this server's config (same cwd, so the same database)."""
        return run_ok(args, self.workdir, config=self.config)

    def create_key(self, group: str = "team", *options: str) -> str:
        """``parley groups create GROUP [OPTIONS…]``, then ``parley keys create``: the key."""
        self.cli(["groups", "create", group, *options])
        return self.cli(["keys", "create", "--group", group]).strip()


class Processes:
    """Every process a test starts; ``stop_all`` kills those still running."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[Proc] = []
        self._count = 0

    def spawn(
        self, name: str, command: list[str], cwd: Path, env: dict[str, str] | None = None
    ) -> Proc:
        self._count += 1
        log = self.workdir / f"{self._count:02d}-{name}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=environment(env),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own, which ``kill`` ends
            )
        proc = Proc(name, process, log)
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.started):
            proc.kill()

    def engine(self) -> str:
        """Start a fake OpenAI-compatible engine; its ``/v1`` base URL."""
        port = free_port()
        proc = self.spawn(
            "engine", [sys.executable, "-m", "tests.upstreams.openai_compatible", str(port)], REPO
        )
        wait_until(proc, lambda: _connects(port), "fake engine")
        return f"http://127.0.0.1:{port}/v1"

    def serve(
        self,
        config: dict[str, Any] | None,
        *,
        cwd: Path | None = None,
        args: tuple[str, ...] = (),
        name: str = "serve",
        wait: bool = True,
        env: dict[str, str] | None = None,
    ) -> Server:
        """``parley serve --port P [ARGS…]`` in ``cwd`` (default the test's directory),
        with ``env`` added to its environment."""
        workdir = cwd or self.workdir
        port = free_port()
        path = None
        command = [sys.executable, "-m", "parley", "serve", "--port", str(port), *args]
        if config is not None:
            path = write_config(self.workdir / f"{name}-{port}.yaml", config)
            command += ["--config", str(path)]
        proc = self.spawn(name, command, workdir, env)
        server = Server(proc.name, proc.process, proc.log, port, workdir, path)
        self.started[-1] = server
        if wait:
            server.wait_ready()
        return server

    def redis(self, port: int | None = None) -> RedisServer:
        """A private ``redis-server`` on ``port`` (default a free one)."""
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        port = port or free_port()
        command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        command += ["--appendonly", "no", "--dir", str(self.workdir)]
        proc = self.spawn("redis-server", command, self.workdir)
        wait_until(proc, lambda: _connects(port), "redis-server")
        return RedisServer(proc, port)


@dataclass
class RedisServer:
    proc: Proc
    port: int

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def wait_until(proc: Proc, ready: Any, what: str, timeout: float = START_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.process.poll() is not None:
            pytest.fail(proc.failure(f"({what}) exited with {proc.process.returncode}"))
        if ready():
            return
        time.sleep(0.05)
    proc.kill()
    pytest.fail(proc.failure(f"({what}) was not ready within {timeout:g}s"))


def eventually(check: Any, what: str, timeout: float = 20.0) -> None:
    """Poll ``check()`` until it is true, or fail after ``timeout`` seconds (generous: CI
    machines are shared, and a passing check returns at once)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    pytest.fail(f"{what}: not within {timeout:g}s")


def _connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/health", timeout=1) as reply:
            return bool(reply.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def usage_count(database_url: str) -> int:
    """How many usage records the database at ``database_url`` holds."""

    async def count() -> int:
        store = await open_store(database_url)
        try:
            return await store.count_usage()
        finally:
            await store.close()

    return asyncio.run(count())
