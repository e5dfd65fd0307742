"""An operator's working day in Debian's Chromium, for keys as products and finding things.

Among 200 tenants, find one by search; open its key; rotate it with a short grace and
see the old secret work, then be refused once the grace is over; type a wrong budget and
see the error beside the field with the input kept; set the key's budget to zero and see
its next call refused with 429 ``insufficient_quota`` while the group's other key works.
Every page is photographed at 1280 and 390 px and must not scroll sideways at either.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from playwright.async_api import Browser, Dialog, Page, expect

from tests.api.harness import Gateway, call
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_dashboard import WIDTHS, sign_in

CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hello there"}]}
TENANT = "globex-international-holdings-research-and-development-division-eu"


async def accept(dialog: Dialog) -> None:
    await dialog.accept()


async def no_sideways_scroll(page: Page, folder: Path, name: str) -> None:
    """Photograph the page at each width and check that nothing overflows it sideways."""
    for width, (w, h) in WIDTHS.items():
        await page.set_viewport_size({"width": w, "height": h})
        await page.screenshot(path=str(folder / f"day-{name}-{width}.png"), full_page=True)
        overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{name} scrolls {overflow}px sideways at {w}px"
    await page.set_viewport_size({"width": 1280, "height": 900})


async def chat(gateway: Gateway, key: str) -> tuple[int, dict[str, object]]:
    status, body = await call(gateway, "POST", "/v1/chat/completions", key, json=CHAT)
    return status, body if isinstance(body, dict) else {}


async def test_find_a_tenant_rotate_its_key_and_cap_its_budget(
    browser: Browser, dashboard: Gateway, artifacts: Path
) -> None:
    for index in range(199):
        await dashboard.group(f"tenant-{index:03}")
    tenant = await dashboard.group(TENANT, models=["chat-large"])
    old = await dashboard.key(tenant)
    other = await dashboard.key(tenant)
    assert (await chat(dashboard, old))[0] == 200
    await dashboard.flush_usage()

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("dialog", accept)
    await sign_in(page, dashboard.base_url, ADMIN_TOKEN)

    await page.get_by_role("link", name="Groups").click()
    await expect(page.locator("[data-group-count]")).to_contain_text("200 groups")
    await expect(page.locator("table tbody tr")).to_have_count(50)
    await no_sideways_scroll(page, artifacts, "groups")
    await page.get_by_label("Find a group").fill("globex")
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("table tbody tr")).to_have_count(1)
    await page.get_by_role("link", name=TENANT).click()
    await expect(page.get_by_role("heading", name=TENANT)).to_be_visible()
    await no_sideways_scroll(page, artifacts, "group")

    await page.locator("table tbody tr").first.get_by_role("link", name="Edit or rotate").click()
    await expect(page.get_by_role("heading", name="Rotate the secret")).to_be_visible()
    key_url = page.url
    await page.get_by_label("Old secret keeps working for (minutes)").fill("0.05")
    await page.get_by_role("button", name="Rotate").click()
    new = (await page.locator("[data-new-key]").inner_text()).strip()
    assert new.startswith("pk-") and new != old
    await expect(page.locator("section.notice")).to_contain_text("keeps working until")
    await no_sideways_scroll(page, artifacts, "key-rotated")
    rotated_old = other if old in await _secrets(dashboard) else old
    untouched = old if rotated_old == other else other
    assert (await chat(dashboard, rotated_old))[0] == 200  # within the grace
    await asyncio.sleep(3.2)
    status, error = await chat(dashboard, rotated_old)
    assert status == 401 and "replaced" in str(error)
    assert (await chat(dashboard, new))[0] == 200
    await page.reload()  # a reload sends the form again: nothing is rotated twice
    await expect(page.locator("[data-notice]")).to_contain_text("already rotated")
    assert (await chat(dashboard, new))[0] == 200

    await page.goto(key_url)
    budget = page.get_by_label("Budget per month (USD)")
    await budget.fill("lots")
    await page.get_by_label("Label", exact=True).fill("mobile app")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("#key-budget_usd-error")).to_contain_text("amount in USD")
    await expect(budget).to_have_value("lots")
    await expect(budget).to_have_attribute("aria-invalid", "true")
    await expect(page.get_by_label("Label", exact=True)).to_have_value("mobile app")
    await no_sideways_scroll(page, artifacts, "key-form-error")
    await budget.fill("0")
    await page.get_by_role("button", name="Save changes").click()
    await expect(page.locator("[data-notice]")).to_have_text("Saved.")
    await expect(page.locator("[data-key-spend]")).to_contain_text("the key's own budget")
    status, error = await chat(dashboard, new)
    assert status == 429 and "insufficient_quota" in str(error)
    assert (await chat(dashboard, untouched))[0] == 200  # the group's other key is not capped

    await page.get_by_role("link", name="Keys").click()
    await page.get_by_label("Find a key").fill(new[:10])
    await page.get_by_role("button", name="Search").click()
    await expect(page.locator("table[data-keys] tbody tr")).to_have_count(1)
    await expect(page.locator("table[data-keys]")).to_contain_text("mobile app")
    await no_sideways_scroll(page, artifacts, "keys")

    await dashboard.flush_usage()
    await page.goto(f"{dashboard.base_url}/admin/ui/usage?by=key")
    await expect(page.locator("[data-usage-charts]")).to_contain_text("Spend by key")
    await no_sideways_scroll(page, artifacts, "usage-by-key")
    await page.goto(f"{dashboard.base_url}/admin/ui/audit?action=key.")
    await expect(page.locator("table[data-audit]")).to_contain_text("key.rotate")
    await expect(page.locator("table[data-audit]")).to_contain_text("key.update")
    await no_sideways_scroll(page, artifacts, "audit")
    assert new not in await page.content()
    await context.close()


async def _secrets(gateway: Gateway) -> list[str]:
    """The secrets the test gateway handed out whose key still has that secret."""
    current = {record.prefix for record in await gateway.services.store.list_keys()}
    return [secret for secret in gateway.keys if secret[:10] in current]
