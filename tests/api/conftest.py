"""Fixtures for end-to-end API tests: a fake engine, a gateway in front of it, a key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api.harness import Gateway, StartGateway, default_config, starting
from tests.upstreams.openai_compatible import FakeEngine


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    async with FakeEngine(api_key="sk-channel-secret-0123456789") as running:
        yield running


@pytest.fixture
async def start_gateway(engine: FakeEngine, tmp_path: Path) -> AsyncIterator[StartGateway]:
    """Start a gateway; ``tweak(config)`` may change the default config first."""
    async with starting(lambda: default_config(engine.base_url, tmp_path)) as start:
        yield start


@pytest.fixture
async def gateway(start_gateway: StartGateway) -> Gateway:
    return await start_gateway()


@pytest.fixture
async def key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("team"))
