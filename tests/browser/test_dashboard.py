"""The operator's whole tenant lifecycle in a real browser (Debian's Chromium).

Log in; create a group with limits and a budget; create a key and read it from the
page; call the gateway with it through the official SDK; see the call in the usage page
and the overview chart; revoke the key and see the next call refused; a forged form is
refused; log out. Every page is photographed at 1280 and 390 px wide.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest
from playwright.async_api import Browser, Dialog, Page, expect

from parley.domain.voices import Clone
from tests.api.harness import CHANNEL_KEY, Gateway
from tests.browser.conftest import ADMIN_TOKEN

WIDTHS = {"wide": (1280, 900), "narrow": (390, 844)}
CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hello there"}]}


async def snap(page: Page, folder: Path, name: str) -> None:
    """A full-page screenshot at each width; and no page ever shows a secret."""
    html = await page.content()
    assert ADMIN_TOKEN not in html and CHANNEL_KEY not in html
    for width, (w, h) in WIDTHS.items():
        await page.set_viewport_size({"width": w, "height": h})
        await page.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)
    await page.set_viewport_size({"width": 1280, "height": 900})


async def sign_in(page: Page, base: str, token: str) -> None:
    await page.goto(f"{base}/admin/")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.get_by_label("Admin token").fill(token)
    await page.get_by_role("button", name="Sign in").click()


async def show_voices(page: Page, dashboard: Gateway, artifacts: Path) -> None:
    """The Voices page with a registered clone (this gateway has no speech engine, so the
    clone is put in the registry directly; deletion is tested in tests/api/speech)."""
    group = await dashboard.services.store.get_group("acme")
    assert group is not None
    clone = Clone(
        group_id=group.id,
        model="tts-pro",
        label="Narrator-EN",
        voice_id=f"g{group.id}__Narrator-EN",
        engine_name=f"g{group.id}__narrator-en",
        channel="omni",
        duration_ms=12_340,
        created_at=datetime.now(UTC),
    )
    await dashboard.services.store.add_clone(clone)
    # No speech model is configured here, so the menu has no Voices tab; the page answers.
    await expect(page.get_by_role("link", name="Voices")).to_have_count(0)
    await page.goto(f"{dashboard.base_url}/admin/ui/voices")
    await expect(page.locator("table[data-voices]")).to_contain_text(clone.voice_id)
    await expect(page.locator("table[data-voices]")).to_contain_text("12.3 s")
    await snap(page, artifacts, "voices")


async def accept(dialog: Dialog) -> None:
    await dialog.accept()


async def test_tenant_lifecycle_in_the_browser(
    browser: Browser, dashboard: Gateway, artifacts: Path
) -> None:
    base = dashboard.base_url
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("dialog", accept)

    await sign_in(page, base, "not-the-token")
    await expect(page.get_by_role("alert")).to_contain_text("not the admin token")
    await snap(page, artifacts, "login")
    await sign_in(page, base, ADMIN_TOKEN)
    await expect(page.get_by_role("heading", name="Overview")).to_be_visible()

    await page.get_by_role("link", name="Groups").click()
    await page.get_by_label("Name").fill("acme")
    await page.get_by_label("Requests per minute").fill("60")
    await page.get_by_label("Tokens per minute").fill("100000")
    await page.get_by_label("Budget per month (USD)").fill("5")
    await page.get_by_role("button", name="Create group").click()
    await expect(page.get_by_role("heading", name="acme", exact=True)).to_be_visible()
    await expect(page.locator("dl.facts")).to_contain_text("60")

    await page.locator("form[action$='/keys'] input[name=name]").fill("browser")
    await page.get_by_role("button", name="Create key").click()
    secret = (await page.locator("[data-new-key]").inner_text()).strip()
    assert secret.startswith("pk-")
    await snap(page, artifacts, "group-new-key")

    client = dashboard.client(secret)
    reply = await client.chat.completions.create(**CHAT)  # type: ignore[call-overload]
    assert reply.choices[0].message.content
    await dashboard.flush_usage()

    await page.goto(f"{base}/admin/ui/usage?group=acme&by=group&by=model")
    row = page.locator("table[data-usage] tbody tr")
    await expect(row).to_have_count(1)
    await expect(row).to_contain_text("acme")
    await expect(row).to_contain_text("chat-large")
    await snap(page, artifacts, "usage")
    csv = await page.request.get(f"{base}/admin/ui/usage.csv?group=acme")
    assert csv.ok and "acme,chat-large,1," in await csv.text()

    await page.get_by_role("link", name="Overview").click()
    await expect(page.locator("[data-stat=requests-today]")).to_have_text("1")
    today = page.locator("svg.chart").first.locator("rect.bar").last
    assert float(await today.get_attribute("height") or 0) > 0
    await snap(page, artifacts, "overview")

    await page.get_by_role("link", name="Groups").click()
    await snap(page, artifacts, "groups")
    await page.get_by_role("link", name="acme").click()
    assert secret not in await page.content()
    await page.get_by_role("button", name="Revoke").click()
    await expect(page.locator("[data-key-status]")).to_have_text("revoked")
    await snap(page, artifacts, "group")
    with pytest.raises(openai.AuthenticationError):
        await client.chat.completions.create(**CHAT)  # type: ignore[call-overload]

    forged = await page.request.post(f"{base}/admin/ui/groups", form={"name": "forged"})
    assert forged.status == 403 and "did not come from this dashboard" in await forged.text()
    wrong = await page.request.post(
        f"{base}/admin/ui/groups", form={"name": "forged", "csrf": "guess"}
    )
    assert wrong.status == 403
    assert await dashboard.services.store.get_group("forged") is None

    await page.get_by_role("link", name="Channels").click()
    await expect(page.locator(".channel")).to_contain_text("engine")
    await expect(page.locator(".channel")).to_contain_text("configured (hidden)")
    await snap(page, artifacts, "channels")
    await page.get_by_role("link", name="Audit log").click()
    for action in ("group.create", "key.create", "key.revoke", "session.login"):
        await expect(page.locator("table")).to_contain_text(action)
    await snap(page, artifacts, "audit")

    await show_voices(page, dashboard, artifacts)

    await page.goto(f"{base}/admin/ui/groups/nobody")
    await snap(page, artifacts, "error")

    await page.get_by_role("button", name="Sign out").click()
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await page.goto(f"{base}/admin/ui/groups")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    await context.close()
