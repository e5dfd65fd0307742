"""Fixtures for the tests that run the real local engines (one process each per test
worker), and gateways configured in front of them as ``parley serve --demo`` does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from parley.local.demo.children import Child
from parley.local.demo.config import demo_config
from tests.api.harness import Gateway
from tests.api.speech.conftest import engines, tenants  # noqa: F401 (the speech gateway)
from tests.engines.local import (
    CHAT_PACKAGES,
    SPEECH_PACKAGES,
    chat_engine,
    require,
    speech_engine,
)

NOWHERE = "http://127.0.0.1:9/v1"


@pytest.fixture(scope="session")
def speech_engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    """``parley engine serve`` (eSpeak NG and PocketSphinx) on a free loopback port."""
    require(SPEECH_PACKAGES)
    engine = speech_engine(tmp_path_factory.mktemp("engine"))
    yield engine
    engine.stop()


@pytest.fixture(scope="session")
def chat_engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    """llama.cpp's OpenAI server with SmolLM2-135M-Instruct, as the demo starts it."""
    require(CHAT_PACKAGES)
    engine = chat_engine(tmp_path_factory.mktemp("llama"))
    yield engine
    engine.stop()


@pytest.fixture
def engine_v1(speech_engine_server: Child) -> str:
    return speech_engine_server.v1


@pytest.fixture
async def audio_gateway(speech_engine_server: Child, tmp_path: Path) -> AsyncIterator[Gateway]:
    """The demo's gateway with its audio engine (the chat channel points nowhere)."""
    gateway = await Gateway.start(demo_config(tmp_path, NOWHERE, speech_engine_server.v1))
    yield gateway
    await gateway.stop()


@pytest.fixture
async def chat_gateway(chat_engine_server: Child, tmp_path: Path) -> AsyncIterator[Gateway]:
    """The demo's gateway with llama.cpp (the audio channels point nowhere)."""
    gateway = await Gateway.start(demo_config(tmp_path, chat_engine_server.v1, NOWHERE))
    yield gateway
    await gateway.stop()
