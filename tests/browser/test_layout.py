"""The dashboard's layout at a laptop's width: every menu entry is visible without
scrolling the menu, and no table breaks a word in two (a header, a number, an address),
which the body's ``overflow-wrap: anywhere`` did to narrow columns."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from playwright.async_api import Browser, Page, expect

from tests.api.harness import Gateway, call, default_config
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_dashboard import sign_in
from tests.upstreams.openai_compatible import FakeEngine

CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hello there"}]}

# The words of each table header and of each cell named here that a line break cuts in
# two: a word whose text spans more than one line box.
BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const cell of document.querySelectorAll(selector)) {
    const text = cell.textContent;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (tops.size > 1) broken.push(match[0] + " in " + text.trim());
      }
    }
  }
  return broken;
}"""


async def broken_words(page: Page, selector: str) -> list[str]:
    found: list[str] = await page.evaluate(BROKEN_WORDS, selector)
    return found


async def test_every_menu_entry_shows_at_laptop_widths(
    browser: Browser, dashboard: Gateway
) -> None:
    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
    for width in (1440, 1280, 1024, 800):
        await page.set_viewport_size({"width": width, "height": 900})
        hidden = await page.evaluate(
            """() => {
              const nav = document.querySelector("header.top nav");
              const box = nav.getBoundingClientRect();
              return [...nav.querySelectorAll("a")].filter((a) => {
                const r = a.getBoundingClientRect();
                return r.left < box.left - 0.5 || r.right > box.right + 0.5;
              }).map((a) => a.textContent.trim());
            }"""
        )
        assert hidden == [], f"menu entries cut off at {width} px: {hidden}"


async def test_tables_break_no_word_in_two(browser: Browser, dashboard: Gateway) -> None:
    made = {"name": "acme", "rpm": 1, "budget_usd": 1, "models": ["chat-large"]}
    assert (await call(dashboard, "POST", "/admin/groups", ADMIN_TOKEN, json=made))[0] == 201
    group = await dashboard.services.store.get_group("acme")
    assert group is not None
    key = await dashboard.key(group)
    assert (await call(dashboard, "POST", "/v1/chat/completions", key, json=CHAT))[0] == 200
    assert (await call(dashboard, "POST", "/v1/chat/completions", key, json=CHAT))[0] == 429
    await dashboard.flush_usage()

    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
    cells = "table th, table td.num, table td[data-label=Who], table td[data-label=From]"
    for path in ("/admin/ui/requests", "/admin/ui/audit", "/admin/ui/groups", "/admin/ui/usage"):
        await page.goto(dashboard.base_url + path)
        assert await page.locator("table tbody tr").count() > 0, path
        assert await broken_words(page, cells) == [], path


async def test_a_phone_keeps_each_stacked_value_in_one_piece(
    browser: Browser, dashboard: Gateway
) -> None:
    """At 390 px a table row becomes label: value lines; a value made of text and a note
    ("$0.00 (no limit)") reads as one phrase, not spread across the line."""
    made = {"name": "acme", "models": ["chat-large"]}
    assert (await call(dashboard, "POST", "/admin/groups", ADMIN_TOKEN, json=made))[0] == 201
    page = await (await browser.new_context(viewport={"width": 390, "height": 900})).new_page()
    await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
    await page.goto(dashboard.base_url + "/admin/ui/groups")
    gap = await page.evaluate(
        """() => {
          const cell = document.querySelector("td[data-label^='Budget']");
          const amount = cell.querySelector("[data-budget-state] .nowrap");
          const rects = [...amount.getClientRects()].filter((r) => r.width > 0);
          const note = cell.querySelector(".muted").getBoundingClientRect();
          return note.left - rects[rects.length - 1].right;
        }"""
    )
    assert 0 <= gap < 12, f"the budget's note stands {gap:.0f} px from its amount"


async def test_an_open_breaker_reads_as_a_time_and_whole_words(
    browser: Browser, tmp_path: Path
) -> None:
    """A channel's page with a breaker just opened: its next probe is a time written as
    the dashboard writes times, and the history's short words stay whole."""
    async with FakeEngine() as engine:
        config = default_config(engine.base_url, tmp_path)
        config["admin"] = {"token": ADMIN_TOKEN}
        config["limits"] = {"cache_refresh_seconds": 0.2}
        config["channels"][0]["models"].append({"name": "unserved", "upstream": "fail-500"})
        gateway = await Gateway.start(config)
        try:
            key = await gateway.key(await gateway.group("acme"))
            ask = {**CHAT, "model": "unserved"}
            for _ in range(5):
                assert (await call(gateway, "POST", "/v1/chat/completions", key, json=ask))[
                    0
                ] == 502
            page = await (
                await browser.new_context(viewport={"width": 1280, "height": 900})
            ).new_page()
            await sign_in(page, gateway.base_url, ADMIN_TOKEN)
            history = page.locator("td[data-label=What]")
            for _ in range(50):  # the refresh loop writes the transition
                await page.goto(gateway.base_url + "/admin/ui/channels/engine")
                if await history.count():
                    break
                await asyncio.sleep(0.2)
            probe = page.locator("tr:has(.breaker-open) td[data-label='Next probe']")
            await expect(probe).to_have_text(
                re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC$")
            )
            await expect(history.first).to_have_text("breaker")
            cells = "table th, table td[data-label=What], table td[data-label=By]"
            assert await broken_words(page, cells) == []
        finally:
            await gateway.stop()
