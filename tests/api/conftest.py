"""Fixtures for end-to-end API tests: a fake engine, a gateway in front of it, a key."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.api.harness import Gateway, StartGateway, default_config, starting
from tests.contract.test_store import POSTGRES_URL, postgres_execute
from tests.upstreams.openai_compatible import FakeEngine


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh database for a test that runs on each store: a SQLite file, then a
    PostgreSQL database of its own (skipped when PostgreSQL is away)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'parley.db'}"
        return
    database = f"api_{secrets.token_hex(6)}"
    try:
        await postgres_execute(f'CREATE DATABASE "{database}"')
    except (OSError, asyncpg.PostgresError) as error:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL} ({error})")
    try:
        yield POSTGRES_URL.rsplit("/", 1)[0] + f"/{database}"
    finally:
        await postgres_execute(f'DROP DATABASE "{database}" WITH (FORCE)')


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
