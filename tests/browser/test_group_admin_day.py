"""A group-admin's working day in Debian's Chromium, at 1280 and 390 px.

Gina administers the group ``acme`` alone. She signs in and lands on her group's page,
with a navigation of her pages only; asks for a key above the group's budget and is
told the group's limit beside the field; creates a key within it and calls with it;
rotates it (the old secret refused at once, the new one working); reads her usage and
her request log and one call's page; and typing another group's page, key or call into
the address bar shows "Not found", the gateway's channels and administrators "Refused".
No page scrolls sideways at either width, and none names the other group.
"""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser, Page, expect

from tests.api.harness import Gateway, call
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_operator_day import accept, chat, no_sideways_scroll

MINE, THEIRS = "acme", "zeta-corp"
GINA, PASSWORD = "gina", "gina-group-admin-pw"


async def admin(gateway: Gateway, method: str, path: str, body: object = None) -> object:
    status, reply = await call(gateway, method, path, ADMIN_TOKEN, json=body)
    assert status in (200, 201), reply
    return reply


async def look(page: Page, artifacts: Path, name: str) -> None:
    """Nothing of the other group on the page, and no sideways scroll at either width."""
    assert THEIRS not in await page.content(), name
    await no_sideways_scroll(page, artifacts, f"group-admin-{name}")


async def test_a_group_admins_day(browser: Browser, dashboard: Gateway, artifacts: Path) -> None:
    await dashboard.group(MINE, models=["chat-large"], budget_nanos=20 * 10**9)
    theirs = await dashboard.group(THEIRS)
    assert (await chat(dashboard, await dashboard.key(theirs)))[0] == 200
    await dashboard.flush_usage()
    _, their_lines = await call(dashboard, "GET", f"/admin/requests?group={THEIRS}", ADMIN_TOKEN)
    their_call = their_lines["data"][0]["request_id"]
    their_key = their_lines["data"][0]["key"]["id"]
    body = {"name": GINA, "role": "group-admin", "group": MINE, "password": PASSWORD}
    await admin(dashboard, "POST", "/admin/accounts", body)

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("dialog", accept)
    base = dashboard.base_url
    await page.goto(f"{base}/admin/")
    await page.get_by_label("Account name").fill(GINA)
    await page.get_by_label("Password or admin token").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()

    # she lands on her group's page, and the navigation holds her pages only
    await expect(page.get_by_role("heading", name=MINE, exact=True)).to_be_visible()
    assert page.url == f"{base}/admin/ui/groups/{MINE}"
    nav = page.get_by_role("navigation", name="Main")
    names = [text.strip() for text in await nav.get_by_role("link").all_inner_texts()]
    assert names == [f"Group {MINE}", "Keys", "Usage", "Requests", "Batches"]
    await expect(page.locator(".whoami")).to_contain_text("gina · group-admin")
    await expect(page.get_by_role("button", name="Disable group")).to_have_count(0)
    await expect(
        page.get_by_role("heading", name="Change limits, budget and access")
    ).to_have_count(0)
    await look(page, artifacts, "group")

    # a key above the group's budget: refused, the limit said beside the field
    await page.get_by_label("Label").fill("mobile app")
    await page.get_by_label("Budget per month (USD)").fill("25")
    await page.get_by_role("button", name="Create key").click()
    error = page.locator("#new-key-budget_usd-error")
    await expect(error).to_contain_text("may not be above its group's ($20.00 per period)")
    await expect(page.get_by_label("Label")).to_have_value("mobile app")
    await look(page, artifacts, "key-refused")
    await page.get_by_label("Budget per month (USD)").fill("5")
    await page.get_by_role("button", name="Create key").click()
    first = (await page.locator("[data-new-key]").inner_text()).strip()
    assert first.startswith("pk-")
    assert (await chat(dashboard, first))[0] == 200
    await look(page, artifacts, "key-created")

    # rotate it: the old secret refused at once, the new one works
    await page.get_by_role("link", name="Edit or rotate").first.click()
    await expect(page.get_by_role("heading", name="Rotate the secret")).to_be_visible()
    await page.get_by_label("Old secret keeps working for (minutes)").fill("0")
    await page.get_by_role("button", name="Rotate").click()
    second = (await page.locator("[data-new-key]").inner_text()).strip()
    assert second.startswith("pk-") and second != first
    assert (await chat(dashboard, first))[0] == 401
    assert (await chat(dashboard, second))[0] == 200
    await look(page, artifacts, "key-rotated")
    await dashboard.flush_usage()

    # her usage and spend, and her request log down to one call
    await nav.get_by_role("link", name="Usage").click()
    await expect(page.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
    await expect(page.locator("main")).to_contain_text(MINE)
    await look(page, artifacts, "usage")
    await nav.get_by_role("link", name="Requests").click()
    rows = page.locator("table tbody tr")
    await expect(rows).to_have_count(3)  # two calls, and the old secret's refusal
    await expect(page.locator("tr[data-status='401']")).to_have_count(1)
    await look(page, artifacts, "requests")
    await rows.first.locator("a").first.click()
    await expect(page.locator("dl[data-request]")).to_contain_text(MINE)
    await look(page, artifacts, "request")
    await nav.get_by_role("link", name="Keys").click()
    await expect(page.locator("table tbody tr")).to_have_count(1)
    await look(page, artifacts, "keys")

    # another group's pages, by address: not found; the gateway's: refused
    for path in (
        f"/admin/ui/groups/{THEIRS}",
        f"/admin/ui/keys/{their_key}",
        f"/admin/ui/requests/{their_call}",
    ):
        reply = await page.goto(base + path)
        assert reply is not None and reply.status == 404, path
        await expect(page.get_by_role("heading", name="Not found")).to_be_visible()
        assert await nav.get_by_role("link").all_inner_texts() == names
    await look(page, artifacts, "not-found")
    for path in ("/admin/ui/channels", "/admin/ui/accounts", "/admin/ui/audit"):
        reply = await page.goto(base + path)
        assert reply is not None and reply.status == 403, path
        await expect(page.get_by_role("heading", name="Refused")).to_be_visible()
        assert await nav.get_by_role("link").all_inner_texts() == names  # hers, still
    await look(page, artifacts, "refused")
    await page.goto(f"{base}/admin/ui/groups")
    assert page.url == f"{base}/admin/ui/groups/{MINE}"
    await context.close()
