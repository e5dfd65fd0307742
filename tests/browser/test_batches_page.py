"""The Batches page in a real browser: a group's batches with their progress and cost,
the group filter, an operator's cancel (audited), the files without their content, and a
batch's lines marked in the request log. Photographed at 1280 and 390 px wide; at 390 px
nothing scrolls sideways."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
from playwright.async_api import Browser, expect

from parley.api.batch_lane import BATCH_LANE
from tests.api.harness import Gateway, call
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_dashboard import sign_in, snap

SIDEWAYS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


async def make_batch(gateway: Gateway, key: str, texts: list[str]) -> str:
    """A batch of chat lines made with ``key`` through /v1; its id."""
    lines = [
        {
            "custom_id": f"line-{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "chat-large", "messages": [{"role": "user", "content": text}]},
        }
        for n, text in enumerate(texts)
    ]
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    form.add_field("file", content, filename="nightly.jsonl")
    status, made = await call(gateway, "POST", "/v1/files", key, data=form)
    assert status == 200, made
    body = {"input_file_id": made["id"], "endpoint": "/v1/chat/completions"}
    status, batch = await call(
        gateway, "POST", "/v1/batches", key, json={**body, "completion_window": "24h"}
    )
    assert status == 200, batch
    return str(batch["id"])


async def ended(gateway: Gateway, key: str, batch_id: str) -> None:
    for _ in range(500):
        _, batch = await call(gateway, "GET", f"/v1/batches/{batch_id}", key)
        if batch["status"] == "completed":
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"batch {batch_id} did not complete")


async def test_the_batches_page_shows_progress_cost_and_cancels(
    browser: Browser, dashboard: Gateway, artifacts: Path
) -> None:
    acme = await dashboard.key(await dashboard.group("acme"))
    zeta = await dashboard.key(await dashboard.group("zeta"))
    done = await make_batch(dashboard, acme, ["first", "second"])
    await ended(dashboard, acme, done)
    await dashboard.runner.app[BATCH_LANE].stop()  # what follows waits, in progress
    waiting = await make_batch(dashboard, acme, ["third", "fourth", "fifth"])
    theirs = await make_batch(dashboard, zeta, ["other"])
    await dashboard.flush_usage()

    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
    await page.get_by_role("link", name="Batches").click()
    rows = page.locator("table[data-batches] tbody tr")
    await expect(rows).to_have_count(3)
    finished = page.locator(f"tr[data-batch='{done}']")
    await expect(finished).to_contain_text("completed")
    await expect(finished.locator("[data-counts]")).to_have_text("2 of 2")
    await expect(finished.locator("[data-cost]")).not_to_have_text("$0.00")
    assert await finished.locator("progress").get_attribute("value") == "2"
    assert await finished.get_by_role("button", name="Cancel").count() == 0
    await expect(page.locator("table[data-files]")).to_contain_text("nightly.jsonl")
    assert "first" not in await page.locator("table[data-files]").inner_text()

    await page.get_by_label("Group").select_option("acme")
    await page.get_by_role("button", name="Show").click()
    await expect(rows).to_have_count(2)
    await expect(page.locator(f"tr[data-batch='{theirs}']")).to_have_count(0)
    await snap(page, artifacts, "batches")

    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    row = page.locator(f"tr[data-batch='{waiting}']")
    await expect(row.locator("[data-counts]")).to_have_text("0 of 3")
    await row.get_by_role("button", name="Cancel").click()
    await expect(page).to_have_url(f"{dashboard.base_url}/admin/ui/batches?group=acme")
    await expect(page.locator(f"tr[data-batch='{waiting}']")).to_have_attribute(
        "data-status", "cancelling"
    )
    _, audit = await call(dashboard, "GET", "/admin/audit?action=batch.cancel", ADMIN_TOKEN)
    assert [entry["target"] for entry in audit["data"]] == [waiting]

    await page.set_viewport_size({"width": 390, "height": 844})
    assert await page.evaluate(SIDEWAYS) <= 0

    await page.goto(f"{dashboard.base_url}/admin/ui/requests?batch={done}")
    lines = page.locator("table[data-requests] tbody tr")
    await expect(lines).to_have_count(2)
    await expect(lines.locator("[data-batch]")).to_have_count(2)
    await expect(page.get_by_label("Batch")).to_have_value(done)
