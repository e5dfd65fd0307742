"""Fixtures for the tests that run the real local engines (one process per test worker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.speech.conftest import engines, tenants  # noqa: F401 (the speech gateway)
from tests.engines.local import SPEECH_PACKAGES, Engine, require, speech_engine


@pytest.fixture(scope="session")
def speech_engine_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """``parley engine serve`` (eSpeak NG and PocketSphinx) on a free loopback port."""
    require(SPEECH_PACKAGES)
    engine = speech_engine(tmp_path_factory.mktemp("engine"))
    yield engine
    engine.stop()


@pytest.fixture
def engine_v1(speech_engine_server: Engine) -> str:
    return speech_engine_server.v1
