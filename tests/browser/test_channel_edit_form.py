"""A stored channel's settings changed in Chromium with a mistake: the form comes back
with what was typed and the error beside its field (announced, described, no serious
axe-core violation, no sideways scrolling at 390 px); corrected, it saves."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from axe_playwright_python.async_playwright import Axe
from cryptography.fernet import Fernet
from playwright.async_api import Browser, expect

from tests.api.admin_client import call
from tests.api.harness import Gateway, default_config
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_accessibility import SIDEWAYS, severe_violations
from tests.upstreams.openai_compatible import FakeEngine

SPARE_KEY = "sk-browser-edit-credential-4410"


@pytest.fixture
async def sealing(tmp_path: Path) -> AsyncIterator[tuple[Gateway, FakeEngine]]:
    async with FakeEngine(api_key=SPARE_KEY) as engine:
        config = default_config(engine.base_url, tmp_path)
        config["admin"] = {"token": ADMIN_TOKEN, "secret_keys": [Fernet.generate_key().decode()]}
        gateway = await Gateway.start(config)
        try:
            yield gateway, engine
        finally:
            await gateway.stop()


async def test_a_failed_channel_change_keeps_the_typing_and_marks_the_field(
    browser: Browser, sealing: tuple[Gateway, FakeEngine], artifacts: Path
) -> None:
    gateway, engine = sealing
    base = gateway.base_url
    body = {
        "name": "spare",
        "base_url": engine.base_url,
        "api_key": SPARE_KEY,
        "priority": 3,
        "models": [{"name": "unserved", "upstream": "spare-model"}],
    }
    status, created = await call(gateway, "POST", "/admin/channels", token=ADMIN_TOKEN, body=body)
    assert status == 201, created

    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    await page.goto(f"{base}/admin/")
    await page.get_by_label("admin token").fill(ADMIN_TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await page.goto(f"{base}/admin/ui/channels/spare")

    form = page.get_by_role("form", name="Change settings")
    typed_url = "http://127.0.0.1:9/typed/v1"
    await form.get_by_label("Base URL").fill(typed_url)
    await form.get_by_label("Models").fill("unserved = typed-model")
    await form.get_by_label("Priority").fill("high")
    await form.get_by_label("Weight").fill("4")
    await form.get_by_role("button", name="Save changes").click()

    assert page.url.endswith("/admin/ui/channels/spare#change")  # scrolled to the form
    form = page.get_by_role("form", name="Change settings")
    priority = form.get_by_label("Priority")
    await expect(priority).to_have_value("high")
    await expect(priority).to_have_attribute("aria-invalid", "true")
    described = re.compile("Priority must be a whole number")
    await expect(priority).to_have_accessible_description(described)
    await expect(form.get_by_label("Base URL")).to_have_value(typed_url)
    await expect(form.get_by_label("Models")).to_have_value("unserved = typed-model")
    await expect(form.get_by_label("Weight")).to_have_value("4")
    await expect(page.get_by_role("alert")).to_contain_text("see the field marked below")
    assert SPARE_KEY not in await page.content()

    axe = Axe()
    for width in (1280, 390):
        await page.set_viewport_size({"width": width, "height": 900})
        assert await severe_violations(axe, page) == []
        assert await page.evaluate(SIDEWAYS) <= 1, f"scrolls sideways at {width} px"
        shot = artifacts / f"channel-edit-error-{width}.png"
        await page.screenshot(path=str(shot), full_page=True)
    await page.set_viewport_size({"width": 1280, "height": 900})

    await form.get_by_label("Base URL").fill(engine.base_url)
    await form.get_by_label("Priority").fill("2")
    await form.get_by_role("button", name="Save changes").click()
    form = page.get_by_role("form", name="Change settings")
    await expect(form.get_by_label("Priority")).to_have_value("2")
    await expect(form.get_by_label("Models")).to_have_value("unserved = typed-model")
    await expect(page.get_by_role("alert")).to_have_count(0)
    status, stored = await call(gateway, "GET", "/admin/channels/spare", token=ADMIN_TOKEN)
    assert (stored["priority"], stored["weight"]) == (2, 4)
    assert [m["upstream"] for m in stored["models"]] == ["typed-model"]
    await page.close()
