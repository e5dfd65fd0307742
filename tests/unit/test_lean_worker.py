"""A worker imports what serving /v1 needs and nothing else: PyAV, asyncpg, SQLAlchemy's
PostgreSQL dialect, Jinja2, the admin API, the dashboard and the OpenAPI description
(about 24 MB together) wait for the first request that uses them. Their routes are
registered all the same, and every deferred handler resolves. On a SQLite file a worker
never loads SQLAlchemy at all (about 14 MB with the store's tables and queries): what it
calls runs on plain ``sqlite3`` (``store/sqlite_serving.py``), and the rest of the store
loads on first use; its ORM and asyncio layer, aiosqlite and greenlet serve PostgreSQL
only (``store/database.py``). Nor does it load Alembic and Mako (about
8 MB), even on a fresh database: a child process migrates it (``store/migrate_apart.py``)."""

from __future__ import annotations

import asyncio
import inspect
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from parley.app import create_app
from parley.domain.groups import Quota
from parley.domain.keys import digest, display_prefix, new_key
from parley.edge.deferred import Deferred, deferred, deferred_of
from parley.settings import Settings
from parley.store.opening import open_store
from parley.store.plain import head_revision
from tests.services import REDIS_URL, redis_unreachable
from tests.upstreams.openai_compatible import FakeEngine

REPO = Path(__file__).resolve().parents[2]
NOT_AT_START = (
    "av",
    "asyncpg",
    "jinja2",
    "sqlalchemy",  # the plain sqlite3 layer serves (parley/store/sqlite_serving.py)
    "sqlalchemy.dialects.postgresql",
    "parley.admin.api",
    "parley.admin.ui",
    "parley.audio.convert",
    "parley.openapi",
    "sqlalchemy.orm",
    "sqlalchemy.ext.asyncio",
    "aiosqlite",
    "greenlet",
    "alembic",
    "mako",
    "botocore",  # Bedrock signs with parley/providers/bedrock/sigv4.py
    "boto3",
    "cryptography",  # only with channel secret keys configured, or a Vertex channel
    "opentelemetry",  # only with telemetry.otlp.endpoint set (parley/telemetry/otel.py)
    "parley.telemetry.otel",
    "google.protobuf",
    "yaml",  # only a process that reads the config file; workers get their settings as JSON
    "multiprocessing",  # the body processes start with the first large body (body_pool.py)
    "concurrent.futures.process",
)
NOT_FOR_CHAT = (
    "parley.api.realtime",  # the /v1 routes a chat call does not use (parley/api/routes.py)
    "parley.api.cascade",
    "parley.api.batches",
    "parley.api.message_batches",
    "parley.api.files",
    "parley.api.images",
    "parley.api.image_files",
    "parley.api.speech",
    "parley.api.transcriptions",
    "parley.api.voice_clones",
    "parley.api.stored_responses",
    "parley.api.moderations",
    "parley.api.rerank",
    "parley.api.billing",
    "parley.api.client_secrets",
    "parley.admin.service",  # the admin API's service and sign-in: the first admin call
    "parley.admin.group_scope",
    "parley.admin.signin",
    "parley.admin.tenancy",
)
SERVE_A_LITTLE = """
import asyncio, sys
import aiohttp
from aiohttp import web
import parley.cli.serve
from parley.app import create_app
from parley.settings import Settings
from parley.store.plain import head_revision
from parley.store.opening import open_store

async def main(database, admin_path):
    settings = Settings.model_validate(
        {"database": {"url": database}, "admin": {"token": "admin-token-0123456789abcdef"}}
    )
    runner = web.AppRunner(create_app(settings))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    async with aiohttp.ClientSession() as http:
        for path in ("/health", "/v1/models", admin_path):
            if path:
                async with http.get(f"http://127.0.0.1:{port}{path}") as reply:
                    await reply.read()
    await runner.cleanup()

asyncio.run(main(sys.argv[1], sys.argv[2]))
print(" ".join(name for name in sys.argv[3:] if name in sys.modules))
"""


async def a_key_on(database: str, quota: Quota | None = None) -> str:
    """A migrated database with one group (``lean``) and a key of it: the key."""
    store = await open_store(database)
    try:
        await store.migrate()
        group = await store.create_group("lean", quota=quota or Quota())
        key = new_key()
        await store.create_key(
            group.id, name="lean", digest=digest(key), prefix=display_prefix(key)
        )
    finally:
        await store.close()
    return key


async def _migrate(database: str) -> None:
    store = await open_store(database)
    try:
        await store.migrate()
    finally:
        await store.close()


def loaded_after_serving(
    tmp_path: Path, admin_path: str = "", *, migrated: bool = True
) -> set[str]:
    """Which of ``NOT_AT_START`` a worker had loaded after starting and a few calls, on a
    database already migrated (as ``parley serve`` finds it), or a fresh one."""
    database = f"sqlite:///{tmp_path / 'parley.db'}"
    if migrated:
        asyncio.run(_migrate(database))
    done = subprocess.run(
        [sys.executable, "-c", SERVE_A_LITTLE, database, admin_path, *NOT_AT_START],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(done.stdout.split())


def test_a_worker_serving_v1_loads_none_of_the_rarely_used_parts(tmp_path: Path) -> None:
    assert loaded_after_serving(tmp_path) == set()


SERVE_A_CHAT = """
import asyncio, sys
import aiohttp
from aiohttp import web
import parley.cli.serve
from parley.app import create_app
from parley.settings import Settings

async def main(database, base_url, key):
    settings = Settings.model_validate({
        "database": {"url": database},
        "channels": [{"name": "fake", "type": "openai", "base_url": base_url,
                      "models": [{"name": "chat-model", "upstream": "fake-model"}]}],
        "models": [{"name": "chat-model", "kind": "chat",
                    "prices": {"input_per_1k": 0.001, "output_per_1k": 0.002}}],
    })
    runner = web.AppRunner(create_app(settings))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    body = {"model": "chat-model", "messages": [{"role": "user", "content": "hello"}]}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http:
        async with http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as reply:
            answer = await reply.json()
    print(reply.status, answer["usage"]["total_tokens"] > 0)
    await runner.cleanup()

asyncio.run(main(*sys.argv[1:4]))
print(" ".join(name for name in sys.argv[4:] if name in sys.modules))
"""


async def test_a_worker_serving_a_chat_call_loads_no_other_endpoint(tmp_path: Path) -> None:
    """A chat call, answered and metered, loads none of the /v1 endpoints it does not
    use, nor the admin API's service: each waits for its own first request."""
    database = f"sqlite:///{tmp_path / 'parley.db'}"
    key = await a_key_on(database)
    async with FakeEngine() as engine:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SERVE_A_CHAT,
            database,
            engine.base_url,
            key,
            *NOT_AT_START,
            *NOT_FOR_CHAT,
            cwd=REPO,
            stdout=subprocess.PIPE,
        )
        out, _ = await child.communicate()
    assert child.returncode == 0
    answered, loaded = out.decode().splitlines()
    assert answered == "200 True"
    assert loaded == ""
    with sqlite3.connect(tmp_path / "parley.db") as db:
        assert db.execute("SELECT count(*) FROM usage_records").fetchone() == (1,)


SERVE_A_CHAT_ON_REDIS = """
import asyncio, sys
import aiohttp
from aiohttp import web
from parley.cli.supervisor import preload
from parley.app import create_app
from parley.pipeline.context import SERVICES
from parley.settings import Settings

async def main(database, base_url, key, redis_url, prefix):
    raw = {
        "database": {"url": database},
        "limits": {"backend": "redis"},
        "redis": {"url": redis_url, "prefix": prefix},
        "channels": [{"name": "fake", "type": "openai", "base_url": base_url,
                      "models": [{"name": "chat-model", "upstream": "fake-model"}]}],
        "models": [{"name": "chat-model", "kind": "chat",
                    "prices": {"input_per_1k": 0.001, "output_per_1k": 0.002}}],
    }
    preload(raw)  # what the supervisor imports before forking a worker on this config
    app = create_app(Settings.model_validate(raw))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    shared = app[SERVICES].shared_breakers
    await asyncio.wait_for(shared.connected.wait(), 10)  # subscribed, the hash read
    body = {"model": "chat-model", "messages": [{"role": "user", "content": "hello"}]}
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http:
        async with http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body) as reply:
            limit = reply.headers.get("x-ratelimit-limit-requests")
    print(reply.status, limit, app[SERVICES].limiter.degraded)
    await runner.cleanup()

asyncio.run(main(*sys.argv[1:6]))
print("redis" in sys.modules, any(name.startswith("redis.") for name in sys.modules))
"""


@pytest.mark.redis
async def test_a_worker_on_redis_never_loads_redis_py(tmp_path: Path) -> None:
    """A worker configured with ``redis:`` (shared limits and breakers) talks to Redis
    through Parley's own client (``parley/resp.py``): redis-py, about 8 MB of every
    worker, is never imported, from the supervisor's preload to a limited call."""
    if (why := redis_unreachable()) is not None:
        pytest.skip(why)
    database = f"sqlite:///{tmp_path / 'parley.db'}"
    prefix = f"test-lean-{uuid.uuid4().hex}"
    key = await a_key_on(database, Quota(rpm=100))
    async with FakeEngine() as engine:
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            SERVE_A_CHAT_ON_REDIS,
            database,
            engine.base_url,
            key,
            REDIS_URL,
            prefix,
            cwd=REPO,
            stdout=subprocess.PIPE,
        )
        out, _ = await child.communicate()
    assert child.returncode == 0
    answered, loaded = out.decode().splitlines()
    assert answered == "200 100 False", "limited through Redis, which answered"
    assert loaded == "False False"


def test_a_worker_started_on_a_fresh_database_migrates_it_without_alembic(
    tmp_path: Path,
) -> None:
    assert loaded_after_serving(tmp_path, migrated=False) == set()
    with sqlite3.connect(tmp_path / "parley.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (head_revision(),)
        ]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


SERVE_COMMAND = """
import sys
import parley.cli.serve
from parley.cli import main

def run_worker(raw_settings, reuse_port):
    print(" ".join(name for name in ("alembic", "mako", "sqlalchemy") if name in sys.modules))

parley.cli.serve.run_worker = run_worker  # serve_command imports it once checks are done
sys.argv = ["parley", "serve", "--port", "0"]
main()
"""


def test_parley_serve_on_a_fresh_database_serves_without_alembic(tmp_path: Path) -> None:
    """The quick start: ``parley serve`` migrates the new ./parley.db, then the same
    process serves (one worker): the upgrade ran in a child, so Alembic is not loaded,
    nor SQLAlchemy (the store on a SQLite file serves with plain ``sqlite3``)."""
    assert after_start(tmp_path, SERVE_COMMAND, "parley.db") == ([], [(head_revision(),)])


def test_the_first_dashboard_page_loads_the_dashboard(tmp_path: Path) -> None:
    """The check above can fail: the same run loads Jinja2 once a page is asked for."""
    loaded = loaded_after_serving(tmp_path, "/admin/login")
    assert {"jinja2", "parley.admin.ui"} <= loaded
    assert "parley.openapi" not in loaded


def _deferred_routes(app: web.Application) -> list[Deferred]:
    found = []
    for resource in app.router.resources():
        info = resource.get_info()
        if "app" in info:
            found += _deferred_routes(info["app"])
            continue
        found += [d for route in resource if (d := deferred_of(route.handler)) is not None]
    return found


def test_every_deferred_handler_resolves_to_a_coroutine_function() -> None:
    settings = Settings.model_validate({"admin": {"token": "admin-token-0123456789abcdef"}})
    handlers = _deferred_routes(create_app(settings))
    assert len(handlers) >= 30  # the admin API, the dashboard's pages, /openapi.json
    for handler in handlers:
        assert inspect.iscoroutinefunction(handler.resolve()), handler.target


def test_a_deferred_handler_is_imported_once() -> None:
    handler = deferred("parley.openapi:openapi_json")
    owner = deferred_of(handler)
    assert owner is not None
    assert owner.resolve() is owner.resolve()
    assert inspect.iscoroutinefunction(handler)


def test_a_target_without_a_function_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="module:function"):
        deferred("parley.openapi.openapi_json")


DEMO_COMMAND = """
import sys
import parley.cli.demo
from parley.settings import Settings

def run_demo(workdir, address, serve, with_store, load, check):
    settings = Settings.model_validate({"database": {"url": "sqlite:///./demo.db"}})

    async def nothing(store):
        return None

    with_store(settings, nothing)  # the demo's first store work: a fresh database
    print(" ".join(name for name in ("alembic", "mako") if name in sys.modules))

parley.cli.demo.run_demo = run_demo
parley.cli.demo.serve_demo(None, None)
"""


def test_the_demo_migrates_its_fresh_database_without_loading_alembic(tmp_path: Path) -> None:
    """The README's first command, ``parley serve --demo``, creates its key on a new
    database and then serves in the same process: the upgrade runs in a child too."""
    assert after_start(tmp_path, DEMO_COMMAND, "demo.db") == ([], [(head_revision(),)])


def after_start(folder: Path, command: str, database: str) -> tuple[list[str], list[Any]]:
    """Run ``command`` in ``folder``: the Alembic modules it printed as loaded, and the
    revision rows ``database`` was left with."""
    done = subprocess.run(
        [sys.executable, "-c", command],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    with sqlite3.connect(folder / database) as db:
        version = db.execute("SELECT version_num FROM alembic_version").fetchall()
    return done.stdout.split(), version
