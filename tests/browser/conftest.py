"""A gateway with the dashboard on, a fake engine behind it, and Debian's Chromium.

The browser is never downloaded: Playwright drives ``/usr/bin/chromium`` headless with
quiet flags (no background networking, no component updates). Screenshots go to
``test-artifacts/screenshots/`` (gitignored) or ``$PARLEY_TEST_ARTIFACTS``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

from tests.api.harness import Gateway, default_config
from tests.upstreams.openai_compatible import FakeEngine

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ADMIN_TOKEN = "admin-token-for-browser-tests-0123456789"


@pytest.fixture
def artifacts() -> Path:
    root = Path(os.environ.get("PARLEY_TEST_ARTIFACTS", "test-artifacts"))
    folder = root / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def chromium() -> Path:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    return CHROMIUM


@pytest.fixture
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        await launched.close()


@pytest.fixture
async def dashboard(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with FakeEngine(api_key="sk-channel-secret-0123456789") as engine:
        config = default_config(engine.base_url, tmp_path)
        config["admin"] = {"token": ADMIN_TOKEN}
        gateway = await Gateway.start(config)
        try:
            yield gateway
        finally:
            await gateway.stop()
