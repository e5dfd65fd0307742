"""axe-core on every dashboard page, in light and dark mode, at 1280 and 390 px: no
violation of serious or critical impact, and no page scrolls sideways. axe-core comes
from the axe-playwright-python package (its ``axe.min.js``), injected into the page by
Playwright; nothing is fetched.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, Page, expect

from parley.domain.requests import RequestQuery
from parley.domain.voices import Clone
from tests.api.harness import Gateway, call
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_batches_page import ended, make_batch
from tests.browser.test_dashboard import sign_in

CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hello there"}]}
SEVERE = ("serious", "critical")
SIDEWAYS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


async def severe_violations(axe: Axe, page: Page) -> list[str]:
    results = await axe.run(page)
    found: list[dict[str, Any]] = results.response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in found
        if v["impact"] in SEVERE
    ]


async def pages_of(gateway: Gateway) -> list[str]:
    """Every kind of dashboard page, with something on it."""
    group = await gateway.group("acme-corporation-with-a-rather-long-tenant-name", rpm=1)
    key = await gateway.key(group)
    for _ in range(2):
        await call(gateway, "POST", "/v1/chat/completions", key, json=CHAT)
    batchers = await gateway.key(await gateway.group("nightly-evaluations-of-a-long-name"))
    batch_id = await make_batch(gateway, batchers, ["one", "two"])
    await ended(gateway, batchers, batch_id)
    await gateway.flush_usage()
    record = (await gateway.services.store.list_keys())[0]
    await _pending_deletion(gateway, group.id)
    request_id = (await gateway.services.store.list_requests(RequestQuery()))[0].record.request_id
    return [
        "/admin/",
        "/admin/ui/groups",
        "/admin/ui/groups?q=nothing-matches",
        f"/admin/ui/groups/{group.name}",
        "/admin/ui/keys",
        f"/admin/ui/keys/{record.id}",
        "/admin/ui/usage?by=key&by=model",
        "/admin/ui/usage?since=bad",
        "/admin/ui/requests",
        f"/admin/ui/requests/{request_id}",
        f"/admin/ui/requests?batch={batch_id}",
        "/admin/ui/batches",
        "/admin/ui/batches?status=bogus",
        "/admin/ui/realtime",
        "/admin/ui/realtime/talk",
        "/admin/ui/channels",
        "/admin/ui/channels/engine",
        "/admin/ui/accounts",
        "/admin/ui/voices",
        "/admin/ui/voices?model=chat-large",
        "/admin/ui/audit",
        "/admin/ui/audit?action=key.",
        "/admin/ui/groups/nobody",
    ]


async def _pending_deletion(gateway: Gateway, group_id: int) -> None:
    """A deleted clone its engine has not deleted, with a long error: the Voices page's
    table of deletions to retry or give up."""
    store = gateway.services.store
    now = datetime.now(UTC)
    clone = Clone(group_id, "tts-gone", "Anna", f"g{group_id}__Anna", "x" * 40, "gone", 4000, now)
    await store.add_clone(clone)
    pending = await store.retire_clone(clone, now, now + timedelta(hours=1))
    assert pending is not None
    error = "HTTP 503: " + "the provider is down for maintenance, please retry later " * 4
    await store.deletion_failed(pending.id, error, now, now + timedelta(hours=1))


async def test_every_dashboard_page_passes_axe(browser: Browser, dashboard: Gateway) -> None:
    axe = Axe()
    failures: list[str] = []
    schemes: tuple[Literal["light", "dark"], ...] = ("light", "dark")
    for scheme in schemes:
        context = await browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme=scheme
        )
        page = await context.new_page()
        await page.goto(f"{dashboard.base_url}/admin/login")
        failures += [f"{scheme} login: {v}" for v in await severe_violations(axe, page)]
        await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
        await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
        failures += [f"{scheme} first day: {v}" for v in await severe_violations(axe, page)]
        await context.close()

    paths = await pages_of(dashboard)
    for scheme in schemes:
        for width in (1280, 390):
            context = await browser.new_context(
                viewport={"width": width, "height": 900}, color_scheme=scheme
            )
            page = await context.new_page()
            await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
            for path in paths:
                await page.goto(f"{dashboard.base_url}{path}")
                found = await severe_violations(axe, page)
                failures += [f"{scheme} {width}px {path}: {v}" for v in found]
                overflow = await page.evaluate(SIDEWAYS)
                if overflow > 0:
                    failures.append(f"{scheme} {width}px {path}: scrolls {overflow}px sideways")
            await context.close()
    assert not failures, "\n".join(failures)


async def test_the_skip_link_moves_focus_to_the_content(
    browser: Browser, dashboard: Gateway
) -> None:
    context = await browser.new_context(viewport={"width": 390, "height": 844})
    page = await context.new_page()
    await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
    await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    await page.goto(f"{dashboard.base_url}/admin/ui/groups")
    await page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    await expect(skip).to_be_focused()
    await expect(skip).to_be_in_viewport()
    await page.keyboard.press("Enter")
    await expect(page.locator("main")).to_be_focused()
    decoration = await page.evaluate(
        "getComputedStyle(document.querySelector('main a')).textDecorationLine"
    )
    assert decoration == "underline"  # links are told apart without their colour
    await context.close()
