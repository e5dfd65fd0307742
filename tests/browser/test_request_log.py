"""The request log in a real browser: calls refused with 429 (a rate) and 404 (a model
the group may not use) are found with the Requests page's filters, with their error
codes, and one line opens on its own page. Photographed at 1280 and 390 px wide."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.async_api import Browser, expect

from tests.api.harness import Gateway, call
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_dashboard import sign_in, snap

CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hello there"}]}


async def test_filter_the_request_log_for_refusals(
    browser: Browser, dashboard: Gateway, artifacts: Path
) -> None:
    group = await dashboard.group("acme", rpm=1, models=["chat-large"])
    key = await dashboard.key(group)
    assert (await call(dashboard, "POST", "/v1/chat/completions", key, json=CHAT))[0] == 200
    assert (await call(dashboard, "POST", "/v1/chat/completions", key, json=CHAT))[0] == 429
    other = {**CHAT, "model": "vision-small"}  # served, but not to this group
    assert (await call(dashboard, "POST", "/v1/chat/completions", key, json=other))[0] == 404
    await dashboard.flush_usage()

    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
    await page.get_by_role("link", name="Requests").click()
    rows = page.locator("table[data-requests] tbody tr")
    await expect(rows).to_have_count(3)

    await page.get_by_label("Group").select_option("acme")
    await page.get_by_label("Status").select_option("4xx")
    await page.get_by_role("button", name="Show").click()
    await expect(rows).to_have_count(2)
    await expect(page.locator("tr[data-status='429']")).to_contain_text("rate_limit_exceeded")
    await expect(page.locator("tr[data-status='404']")).to_contain_text("model_not_found")
    await expect(page.locator("tr[data-status='404']")).to_contain_text("vision-small")
    await snap(page, artifacts, "requests")

    await page.get_by_label("Status").select_option("429")
    await page.get_by_role("button", name="Show").click()
    await expect(rows).to_have_count(1)
    await page.locator("tr[data-status='429'] a").click()
    facts = page.locator("dl[data-request]")
    await expect(facts).to_contain_text("rate_limit_exceeded")
    await expect(facts).to_contain_text("refused before admission")
    # Read as the rest of the dashboard writes times, to the millisecond, not raw ISO.
    await expect(facts).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC"))
    await expect(facts).not_to_contain_text("+00:00")
    await expect(facts.get_by_role("link", name="acme")).to_have_attribute(
        "href", "/admin/ui/groups/acme"
    )
    assert await facts.locator("a[href^='/admin/ui/keys/']").count() == 1
    await snap(page, artifacts, "request")
    assert key not in await page.content()

    await page.get_by_role("link", name="Overview").click()
    await expect(page.locator("[data-stat=rate-limited-today]")).to_have_text("1")
    await expect(page.locator("[data-stat=client-errors-today]")).to_have_text("1")
