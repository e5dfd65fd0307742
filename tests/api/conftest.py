"""Fixtures for end-to-end API tests: a fake engine, a gateway in front of it, a key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api.harness import Gateway, default_config
from tests.upstreams.openai_compatible import FakeEngine

StartGateway = Callable[..., Awaitable[Gateway]]


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    async with FakeEngine(api_key="sk-channel-secret-0123456789") as running:
        yield running


@pytest.fixture
async def start_gateway(engine: FakeEngine, tmp_path: Path) -> AsyncIterator[StartGateway]:
    """Start a gateway; ``tweak(config)`` may change the default config first."""
    started: list[Gateway] = []

    async def start(tweak: Callable[[dict[str, Any]], None] | None = None) -> Gateway:
        config = default_config(engine.base_url, tmp_path)
        if tweak is not None:
            tweak(config)
        gateway = await Gateway.start(config)
        started.append(gateway)
        return gateway

    yield start
    for gateway in started:
        await gateway.stop()


@pytest.fixture
async def gateway(start_gateway: StartGateway) -> Gateway:
    return await start_gateway()


@pytest.fixture
async def key(gateway: Gateway) -> str:
    return await gateway.key(await gateway.group("team"))
