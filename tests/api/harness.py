"""A real Parley over real HTTP, in the test's own event loop, against fake engines.

``Gateway`` builds settings from the arguments, starts the aiohttp app on a free port,
and creates groups and keys through the same store the app uses. Tests then call it with
the official ``openai`` SDK (``gateway.client(key)``) or plain aiohttp (``call``).
``starting(config)`` is what a ``start_gateway`` fixture yields: start gateways from a
config (changed first by a test's ``tweak``), all stopped at the end. ``records(gateway)``
reads every usage record back.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import openai
from aiohttp import web
from sqlalchemy import select

from parley.app import create_app
from parley.domain.groups import Group, Quota
from parley.domain.keys import digest, display_prefix, new_key
from parley.domain.usage import UsageRecord
from parley.edge.runner import EdgeRunner
from parley.pipeline.context import SERVICES
from parley.pipeline.services import Services
from parley.settings import Settings
from parley.store.engine import sqlite_file
from parley.store.schema import usage_records
from parley.store.sql import open_store
from tests.upstreams.openai_compatible import FakeEngine

CHANNEL_KEY = "sk-channel-secret-0123456789"
Config = dict[str, Any]
StartGateway = Callable[..., Awaitable["Gateway"]]


def local_state(workdir: Path) -> Config:
    """A SQLite store in ``workdir``, usage written every 50 ms, keys refreshed often."""
    return {
        "database": {"url": f"sqlite:///{workdir / 'parley.db'}"},
        "usage": {"flush_seconds": 0.05, "spill_dir": str(workdir)},
        "limits": {"cache_refresh_seconds": 0.2},
    }


def default_config(engine_url: str, workdir: Path) -> Config:
    """One channel serving a chat model (spec prices) and a vision model, on SQLite."""
    return {
        **local_state(workdir),
        "server": {"max_image_bytes": 1000},
        "channels": [
            {
                "name": "engine",
                "base_url": engine_url,
                "api_key": CHANNEL_KEY,
                "models": [
                    {"name": "chat-large", "upstream": "upstream-chat"},
                    {"name": "vision-small"},
                ],
                "timeouts": {"connect": 2, "read": 5},
            }
        ],
        "models": [
            {
                "name": "chat-large",
                "kind": "chat",
                "aliases": ["chat"],
                "retired_aliases": ["chat-legacy"],
                "context_window": 32768,
                "prices": {"input_per_1k": "0.00001", "output_per_1k": "0.00003"},
            },
            {"name": "vision-small", "kind": "chat", "vision": True},
            {"name": "unserved", "kind": "chat"},
        ],
        "capabilities": {"LLM_CHAT": "chat-large", "LLM_VISION": "vision-small"},
    }


_MIGRATED: dict[str, Path] = {}
"""The SQLite file this test process migrated once, copied for every fresh database."""


async def seed_database(url: str) -> None:
    """Start a new SQLite file as a copy of one already at the newest revision.

    A server started on a fresh file migrates it in a child process
    (``store/migrate_apart.py``): a second of CPU per gateway, paid by nearly every API
    test. The migrations themselves are tested where they are the subject
    (``tests/contract/test_migrate_apart.py``, ``tests/unit/test_lean_worker.py``, the
    process tests); here every gateway gets the same schema by copying one file
    migrated once per test process. An existing file, or any other database, is left
    alone."""
    path = _fresh_sqlite_file(url)
    if path is None:
        return
    template = _MIGRATED.get("sqlite")
    if template is None:
        folder = Path(tempfile.mkdtemp(prefix="parley-migrated-"))
        atexit.register(shutil.rmtree, folder, True)
        template = folder / "parley.db"
        store = await open_store(f"sqlite:///{template}")
        try:
            await store.migrate()
        finally:
            await store.close()
        _MIGRATED["sqlite"] = template
    shutil.copyfile(template, path)


def _fresh_sqlite_file(url: str) -> Path | None:
    """The path of a SQLite file that does not exist yet; None for anything else."""
    path = sqlite_file(url)
    return None if path is None or Path(path).exists() else Path(path)


@dataclass
class Gateway:
    settings: Settings
    runner: web.AppRunner | None = None
    base_url: str = ""
    keys: list[str] = field(default_factory=list)
    clients: list[openai.AsyncOpenAI | anthropic.AsyncAnthropic] = field(default_factory=list)

    @classmethod
    async def start(cls, config: dict[str, Any], *, port: int = 0) -> Gateway:
        """Serve ``config`` on 127.0.0.1, on ``port`` (0: any free one)."""
        gateway = cls(Settings.model_validate(config))
        await seed_database(gateway.settings.database.url)
        app = create_app(gateway.settings)
        gateway.runner = EdgeRunner(
            app, gateway.settings.server, handler_cancellation=True, shutdown_timeout=1
        )
        await gateway.runner.setup()
        site = web.TCPSite(gateway.runner, "127.0.0.1", port)
        await site.start()
        port = gateway.runner.addresses[0][1]
        gateway.base_url = f"http://127.0.0.1:{port}"
        return gateway

    async def stop(self) -> None:
        """Close the SDK clients (their keep-alive connections), then the server."""
        for client in self.clients:
            await client.close()
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

    @property
    def services(self) -> Services:
        assert self.runner is not None
        return self.runner.app[SERVICES]

    @property
    def v1(self) -> str:
        return f"{self.base_url}/v1"

    async def group(
        self,
        name: str,
        *,
        rpm: int | None = None,
        tpm: int | None = None,
        models: Sequence[str] | None = None,
        budget_nanos: int | None = None,
    ) -> Group:
        group = await self.services.store.create_group(
            name,
            quota=Quota(rpm=rpm, tpm=tpm),
            models=frozenset(models) if models is not None else None,
            budget_nanos=budget_nanos,
        )
        self.services.directory.remember_group(group)
        return group

    async def key(
        self,
        group: Group,
        *,
        expires_at: datetime | None = None,
        rpm: int | None = None,
        tpm: int | None = None,
    ) -> str:
        secret = new_key()
        record = await self.services.store.create_key(
            group.id,
            name="test",
            digest=digest(secret),
            prefix=display_prefix(secret),
            expires_at=expires_at,
            quota=Quota(rpm=rpm, tpm=tpm),
        )
        self.services.directory.remember_key(record)
        self.keys.append(secret)
        return secret

    def client(self, key: str, *, max_retries: int = 0) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(base_url=self.v1, api_key=key, max_retries=max_retries)
        self.clients.append(client)
        return client

    def claude(self, key: str) -> anthropic.AsyncAnthropic:
        """An ``anthropic`` SDK client of this gateway's Messages endpoint, closed at stop."""
        client = anthropic.AsyncAnthropic(base_url=self.base_url, api_key=key, max_retries=0)
        self.clients.append(client)
        return client

    async def flush_usage(self) -> None:
        """Write every queued usage record now."""
        assert await self.services.meter.writer.flush()
        await self.services.tasks.drain(seconds=5)

    async def usage_count(self) -> int:
        await self.flush_usage()
        return await self.services.store.count_usage()


@asynccontextmanager
async def starting(config: Callable[[], Config]) -> AsyncIterator[StartGateway]:
    """``start(tweak=None)``: a gateway on ``config()`` (``tweak(config)`` may change it
    first); every gateway started is stopped when the block ends."""
    started: list[Gateway] = []

    async def start(tweak: Callable[[Config], None] | None = None) -> Gateway:
        settings = config()
        if tweak is not None:
            tweak(settings)
        gateway = await Gateway.start(settings)
        started.append(gateway)
        return gateway

    try:
        yield start
    finally:
        for gateway in started:
            await gateway.stop()


@asynccontextmanager
async def with_backup(config: Callable[[str], Config]) -> AsyncIterator[Gateway]:
    """A gateway on ``config(backup_url)``, where a fake OpenAI-compatible engine serves
    the models a provider's channel falls over to; both stop when the block ends."""
    async with FakeEngine() as backup, starting(lambda: config(backup.base_url)) as start:
        yield await start()


async def call(
    gateway: Gateway, method: str, path: str, key: str | None, **request: Any
) -> tuple[int, Any]:
    """``method path`` (from the root: ``/v1/...``, ``/admin/...``) with ``key`` as its
    Bearer token (none when ``None``); the status and the JSON body (the text if not JSON).
    ``request`` is aiohttp's: ``json=``, ``data=``, ``headers=`` (added to the token)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    headers.update(request.pop("headers", None) or {})
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, f"{gateway.base_url}{path}", headers=headers, **request) as reply,
    ):
        if reply.content_type == "application/json":
            return reply.status, await reply.json()
        return reply.status, await reply.text()


async def records(gateway: Gateway) -> list[UsageRecord]:
    """Every usage record of an admitted call (not the refusals the request log also
    keeps), read back through the store's raw table."""
    await gateway.flush_usage()
    store: Any = gateway.services.store
    admitted = select(usage_records).where(usage_records.c.admitted)
    rows = await store.database.read(lambda conn: conn.execute(admitted).all())
    return [UsageRecord(**row._asdict()) for row in rows]


async def usage_stream(
    gateway: Gateway, key: str, messages: Any, model: str = "chat-large"
) -> list[Any]:
    """The chunks of a streamed ``model`` call that asks for usage, as the official SDK
    gives them."""
    stream = await gateway.client(key).chat.completions.create(
        model=model,
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    return [chunk async for chunk in stream]


def streamed_text(chunks: list[Any]) -> str:
    """The text a chat stream's chunks carry, joined."""
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
