"""A caller cannot write a line of its own into the text log: a path, a header or a
model name holding a line break (or any control character) is logged escaped, on the
line of the record it belongs to."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from yarl import URL

from parley.app import create_app
from parley.edge.runner import EdgeRunner
from parley.settings import Settings
from parley.telemetry.access import AccessLogger, access_logger
from parley.telemetry.logs import TextFormatter
from tests.api.admin_client import ADMIN
from tests.api.harness import default_config
from tests.upstreams.openai_compatible import FakeEngine

FORGED_PATHS = [
    "/admin/x%0aFORGED",
    "/admin/x%0d%0aFORGED",
    "/admin/x%0dFORGED",
    "/admin/x%1b%5b2K%0dFORGED",
    "/v1/x%e2%80%a8FORGED",
    "/v1/models/x%c2%85FORGED",
]


@pytest.fixture
async def logged_gateway(
    engine: FakeEngine, tmp_path: Path
) -> AsyncIterator[tuple[str, io.StringIO]]:
    """A gateway with the access log on and the admin API, whose text log is kept."""
    config = default_config(engine.base_url, tmp_path) | {"admin": {"token": ADMIN}}
    settings = Settings.model_validate(config)
    runner = EdgeRunner(
        create_app(settings),
        settings.server,
        access_log=access_logger(),
        access_log_class=AccessLogger,
        shutdown_timeout=1,
    )
    text = io.StringIO()
    handler = logging.StreamHandler(text)
    handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", text
    finally:
        await runner.cleanup()
        root.removeHandler(handler)
        root.setLevel(level)


def forged_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "FORGED" in line.split(" ", 1)[0]]


async def test_a_path_with_a_line_break_forges_no_log_line(
    logged_gateway: tuple[str, io.StringIO],
) -> None:
    base, text = logged_gateway
    async with aiohttp.ClientSession() as session:
        for path in FORGED_PATHS:
            for headers in ({}, {"Authorization": f"Bearer {ADMIN}"}):
                url = URL(f"{base}{path}", encoded=True)
                async with session.get(url, headers=headers) as response:
                    assert response.status in (401, 404), path
                    await response.read()
        model: dict[str, Any] = {"model": "chat\nFORGED", "messages": []}
        async with session.post(f"{base}/v1/chat/completions", json=model) as response:
            await response.read()
    log = text.getvalue()
    access = [line for line in log.splitlines() if "parley.access" in line]
    assert len(access) == 2 * len(FORGED_PATHS) + 1, log
    assert r"/admin/x\nFORGED" in log  # the path is there, escaped
    assert not forged_lines(log), log
    assert not [line for line in log.split("\n") if line.startswith(("FORGED", "\x1b"))]
    assert all(line.isprintable() for line in log.split("\n") if line), log
