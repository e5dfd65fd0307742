"""Two ``parley serve`` instances sharing one PostgreSQL database: a channel added
through one instance's admin API is served by the other within the refresh interval,
and disabling it on the second stops it on the first (no restart, no Redis)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography.fernet import Fernet

from tests.process.calls import Chat, call, gateway_config
from tests.process.conftest import PostgresDatabase
from tests.process.procs import Processes, eventually

pytestmark = [pytest.mark.postgres]

ADMIN = "admin-token-for-scale-out-0123456789"
SPARE = "spare-model"
REFRESH_SECONDS = 0.5


def admin_call(base_url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async def run() -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                method,
                f"{base_url}/admin{path}",
                json=body,
                headers={"Authorization": f"Bearer {ADMIN}"},
            ) as reply,
        ):
            return reply.status, await reply.json()

    return asyncio.run(run())


def test_a_channel_added_on_one_instance_is_served_by_the_other(
    procs: Processes, engine: str, tmp_path: Path, postgres_db: PostgresDatabase
) -> None:
    config = gateway_config(
        engine,
        tmp_path,
        database_url=postgres_db.url,
        limits={"cache_refresh_seconds": REFRESH_SECONDS},
        admin={"token": ADMIN, "secret_keys": [Fernet.generate_key().decode()]},
    )
    config["models"].append({"name": SPARE, "kind": "chat"})
    first = procs.serve(config, name="first")
    second = procs.serve(config, name="second")
    key = first.create_key("team")
    ask_second = Chat(second.v1, key, model=SPARE)
    ask_first = Chat(first.v1, key, model=SPARE)
    eventually(lambda: call(Chat(second.v1, key)).status == 200, "the key on the second")
    assert call(ask_second).status == 503

    channel = {
        "name": "added-live",
        "base_url": engine,
        "api_key": "sk-live-credential-0123456789",
        "models": [{"name": SPARE, "upstream": "upstream-spare"}],
    }
    status, created = admin_call(first.base_url, "POST", "/channels", channel)
    assert status == 201, created
    added = time.monotonic()
    eventually(lambda: call(ask_second).status == 200, "the channel on the second", 10)
    took = time.monotonic() - added
    assert took < REFRESH_SECONDS * 4 + 1, took
    reply = call(ask_second)
    assert reply.json()["model"] == SPARE

    status, _ = admin_call(second.base_url, "POST", "/channels/added-live/disable")
    assert status == 200
    assert call(ask_second).status == 503
    eventually(lambda: call(ask_first).status == 503, "the disabling on the first", 10)
    status, listed = admin_call(first.base_url, "GET", "/channels")
    assert [c["disabled"] for c in listed["data"] if c["name"] == "added-live"] == [True]

    assert first.terminate() == 0 and second.terminate() == 0
    for server in (first, second):
        assert "Traceback" not in server.output()
        assert "sk-live-credential" not in server.output()
