"""An owner adds a model on the Models page, calls it, schedules a new price and
deletes it; a viewer sees the models and no control that changes them. Debian's
Chromium; every page at 1280 and 390 px, none scrolling sideways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, Page, expect

from tests.api.harness import Gateway, call
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_accessibility import SIDEWAYS, severe_violations
from tests.browser.test_channels_accounts import nav, sign_in, snap, staffed  # noqa: F401

ASK = {"model": "fresh-model", "messages": [{"role": "user", "content": "hi"}]}


async def fresh_status(page: Page, base: str, key: str) -> int:
    reply = await page.request.post(
        f"{base}/v1/chat/completions", data=ASK, headers={"Authorization": f"Bearer {key}"}
    )
    return reply.status


async def test_an_owner_adds_prices_and_deletes_a_model_and_a_viewer_only_looks(
    browser: Browser,
    staffed: Gateway,  # noqa: F811
    artifacts: Path,
) -> None:
    base = staffed.base_url
    key = await staffed.key(await staffed.group("acme"))
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())
    await sign_in(page, base, "olivia")
    assert await fresh_status(page, base, key) == 404

    await nav(page, "Models")
    await expect(page.locator("[data-model=chat-large] [data-source]")).to_have_text("from config")
    await expect(page.locator("[data-model=chat-large]")).to_contain_text("engine → upstream-chat")
    await snap(page, artifacts, "models")

    form = page.locator("#add")
    await form.get_by_label("Name", exact=True).fill("fresh-model")
    await form.get_by_label("Channels").fill("engine = upstream-fresh")
    await form.get_by_label("Aliases").fill("fresh, crisp")
    await form.get_by_label("Input, per 1K tokens", exact=True).fill("lots")
    await form.get_by_role("button", name="Add model").click()
    price = form.locator("#new-model-input_per_1k")  # its label now holds the error too
    await expect(price).to_have_attribute("aria-invalid", "true")
    await expect(form.locator(".field-error")).to_contain_text("input_per_1k")
    await expect(form.get_by_label("Name", exact=True)).to_have_value("fresh-model")  # kept
    await snap(page, artifacts, "models-add-error")

    await price.fill("0.002")
    await form.get_by_label("Output, per 1K tokens", exact=True).fill("0.004")
    await form.get_by_role("button", name="Add model").click()
    await expect(page.get_by_role("heading", name="fresh-model", exact=True)).to_be_visible()
    await expect(page.locator("dd[data-prices]")).to_contain_text("$0.002 per 1K input tokens")
    assert await fresh_status(page, base, key) == 200

    at = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
    change = page.locator("form[aria-labelledby=change]")
    await change.get_by_label("Input, per 1K tokens", exact=True).fill("0.01")
    await change.get_by_label("New prices take effect at").fill(at.isoformat())
    await change.get_by_role("button", name="Save changes").click()
    await expect(page.locator("dd[data-next-prices]")).to_contain_text("$0.01 per 1K input")
    await expect(page.locator("dd[data-prices]")).to_contain_text("$0.002 per 1K input")
    await snap(page, artifacts, "model-scheduled")

    await nav(page, "Models")  # a realtime model, its audio priced apart
    form = page.locator("#add")
    await form.get_by_label("Name", exact=True).fill("fresh-voice")
    await form.get_by_label("Kind").select_option("realtime")
    await form.get_by_label("Channels").fill("engine = upstream-voice")
    for label, price in (
        ("Input, per 1K tokens", "0.004"),
        ("Output, per 1K tokens", "0.016"),
        ("Audio input, per 1K tokens (realtime)", "0.032"),
        ("Audio output, per 1K tokens (realtime)", "0.064"),
    ):
        await form.get_by_label(label, exact=True).fill(price)
    await form.get_by_role("button", name="Add model").click()
    await expect(page.get_by_role("heading", name="fresh-voice", exact=True)).to_be_visible()
    await expect(page.locator("dd[data-prices]")).to_contain_text(
        "$0.064 per 1K audio output tokens"
    )

    await nav(page, "Models")
    await expect(page.locator("[data-model=fresh-model] [data-source]")).to_have_text(
        "managed here"
    )
    await expect(page.locator("[data-model=fresh-model] dd[data-next-prices]")).to_contain_text(
        "$0.01"
    )
    await snap(page, artifacts, "models-live")

    await nav(page, "Audit log")
    for action in ("model.create", "model.update"):
        await expect(page.locator("table")).to_contain_text(action)
    await page.get_by_role("button", name="Sign out").click()

    await sign_in(page, base, "vera")
    for path in ("/admin/ui/models", "/admin/ui/models/fresh-model"):
        await page.goto(f"{base}{path}")
        assert await page.locator("main form[method=post]").count() == 0, path
    await snap(page, artifacts, "model-viewer")
    await page.get_by_role("button", name="Sign out").click()

    await sign_in(page, base, "olivia")
    await page.goto(f"{base}/admin/ui/models/fresh-model")
    await page.get_by_role("button", name="Delete model").click()
    await expect(page.get_by_role("heading", name="Models", exact=True)).to_be_visible()
    assert await page.locator("[data-model=fresh-model]").count() == 0
    assert await fresh_status(page, base, key) == 404
    await context.close()


async def test_the_models_pages_pass_axe_at_both_widths(
    browser: Browser,
    staffed: Gateway,  # noqa: F811
) -> None:
    live = {"name": "live-model", "channels": ["engine"], "prices": {"input_per_1k": "0.001"}}
    assert (await call(staffed, "POST", "/admin/models", ADMIN_TOKEN, json=live))[0] == 201
    axe, failures = Axe(), []
    for width in (1280, 390):
        context = await browser.new_context(viewport={"width": width, "height": 900})
        page = await context.new_page()
        await sign_in(page, staffed.base_url, "olivia")
        for path in ("/admin/ui/models", "/admin/ui/models/live-model"):
            await page.goto(f"{staffed.base_url}{path}")
            failures += [f"{width}px {path}: {v}" for v in await severe_violations(axe, page)]
            if (overflow := await page.evaluate(SIDEWAYS)) > 0:
                failures.append(f"{width}px {path}: scrolls {overflow}px sideways")
        await context.close()
    assert not failures, "\n".join(failures)
