"""The dashboard never misleads, seen in Debian's Chromium at 1280 and 390 px.

A day with a rotation, a key with its own rates, budget and models, a group over its
budget and one near it, a failing channel: the request log keeps each line's own prefix
and breaks no path or prefix inside a word; the overview names the top spenders and the
groups nearest their budget, flagged in colour and in words; every chart label lies
inside its chart and every money axis is in dollars; a failed call's page says why; the
Voices tab is absent without a speech model; and a key is made from the Keys page.
Nothing scrolls sideways at either width.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Dialog, Page, expect

from tests.api.harness import CHANNEL_KEY, Gateway, call, default_config
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_dashboard import WIDTHS, sign_in
from tests.browser.test_layout import broken_words
from tests.upstreams.openai_compatible import FakeEngine

CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hello there friend"}]}
TENANT = "globex-international-holdings-research-and-development-division-eu"

# Each chart text whose box reaches outside its chart's viewBox (a clipped label).
CLIPPED_LABELS = """() => {
  const clipped = [];
  for (const svg of document.querySelectorAll("svg.chart")) {
    const [, , width, height] = svg.getAttribute("viewBox").split(" ").map(Number);
    for (const text of svg.querySelectorAll("text")) {
      const box = text.getBBox();
      if (box.x < -0.5 || box.y < -0.5 || box.x + box.width > width + 0.5
          || box.y + box.height > height + 0.5) clipped.push(text.textContent);
    }
  }
  return clipped;
}"""


WHOLE_WORDS = (
    "td[data-label=Endpoint] code, td[data-label=Key] code, td[data-label='Group · key'] code,"
    " [data-request] code, [data-top-spenders] code"
)
"""The paths and key prefixes of the tables (and a request's page): none may be broken
inside a word (a path may break after a '/')."""


@pytest.fixture
async def busy(tmp_path: Path) -> AsyncIterator[Gateway]:
    """A gateway whose chat model costs real money and with a model whose upstream fails."""
    async with FakeEngine(api_key=CHANNEL_KEY) as engine:
        config = default_config(engine.base_url, tmp_path)
        config["admin"] = {"token": ADMIN_TOKEN}
        config["models"][0]["prices"] = {"input_per_1k": "10", "output_per_1k": "30"}
        config["channels"][0]["models"].append({"name": "chat-broken", "upstream": "fail-502"})
        config["models"].append({"name": "chat-broken", "kind": "chat"})
        gateway = await Gateway.start(config)
        try:
            yield gateway
        finally:
            await gateway.stop()


async def accept(dialog: Dialog) -> None:
    await dialog.accept()


async def honest_at_each_width(page: Page, folder: Path, name: str) -> None:
    """At 1280 and 390 px: no sideways scroll, no clipped chart label, no path or prefix
    broken inside a word."""
    for width, (w, h) in WIDTHS.items():
        await page.set_viewport_size({"width": w, "height": h})
        await page.screenshot(path=str(folder / f"truth-{name}-{width}.png"), full_page=True)
        overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{name} scrolls {overflow}px sideways at {w}px"
        assert await page.evaluate(CLIPPED_LABELS) == [], f"{name} clips a label at {w}px"
        broken = await broken_words(page, WHOLE_WORDS)
        assert broken == [], f"{name} at {w}px breaks {broken}"
    await page.set_viewport_size({"width": 1280, "height": 900})


async def chat(gateway: Gateway, key: str, model: str = "chat-large") -> int:
    body = {**CHAT, "model": model}
    status, _ = await call(gateway, "POST", "/v1/chat/completions", key, json=body)
    return status


async def test_the_dashboard_tells_the_truth(
    browser: Browser, busy: Gateway, artifacts: Path
) -> None:
    base = busy.base_url
    spent = await busy.group("spent", budget_nanos=200_000_000)  # one call costs $0.15
    near = await busy.group("nearly", budget_nanos=180_000_000)
    await busy.group("roomy", budget_nanos=100 * 10**9)
    tenant = await busy.group(TENANT)
    spender, nearly, tenant_key = (
        await busy.key(spent),
        await busy.key(near),
        await busy.key(tenant),
    )
    assert await chat(busy, spender) == 200
    assert await chat(busy, spender) == 200  # admitted on the spend known before it
    assert await chat(busy, spender) == 429
    assert await chat(busy, nearly) == 200
    assert await chat(busy, tenant_key, "chat-broken") == 502
    await busy.flush_usage()

    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("dialog", accept)
    await sign_in(page, base, ADMIN_TOKEN)
    await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    await expect(page.get_by_role("link", name="Voices")).to_have_count(0)

    top = page.locator("[data-top-spenders]")
    await expect(top).to_contain_text("spent")
    await expect(top.locator("[data-budget-state=over]")).to_contain_text("over budget")
    nearest = page.locator("[data-nearest-budget] tbody tr")
    await expect(nearest.first).to_contain_text("spent")
    await expect(nearest.nth(1)).to_contain_text("near budget")
    over = top.locator("[data-budget-state=over] .pill").first
    colour = await over.evaluate("e => getComputedStyle(e).color")
    plain = await page.locator("h1").evaluate("e => getComputedStyle(e).color")
    assert colour != plain  # flagged in colour as well as in words
    ticks = await page.locator("svg.chart").nth(2).locator("text.tick").all_text_contents()
    money = [tick for tick in ticks if not tick[:3].isalpha()]  # not the day labels
    assert money and all(tick.lstrip("<").startswith("$") for tick in money), money
    await honest_at_each_width(page, artifacts, "overview")

    await page.get_by_role("link", name="Keys").click()
    form = page.locator("form[data-create-key]")
    await form.locator("select[name=group]").select_option(TENANT)
    await form.get_by_label("Label").fill("made-on-the-keys-page")
    await form.get_by_label("Requests per minute").fill("2")
    await form.get_by_label("Budget per month (USD)").fill("5")
    await form.get_by_role("button", name="Create key").click()
    secret = (await page.locator("[data-new-key]").inner_text()).strip()
    assert secret.startswith("pk-")
    assert await chat(busy, secret) == 200
    for _ in range(2):
        status, refused = await call(busy, "POST", "/v1/chat/completions", secret, json=CHAT)
    assert status == 429 and "2 requests per minute for this key" in str(refused)

    await page.get_by_role("link", name="Keys").click()
    row = page.locator("table[data-keys] tbody tr", has_text="made-on-the-keys-page")
    await expect(row).to_contain_text("2 req/min")
    await expect(row).to_contain_text("of $5.00")
    await honest_at_each_width(page, artifacts, "keys")

    await row.get_by_role("link").first.click()
    await expect(page.locator("[data-key-rpm]")).to_have_text("2 requests per minute for this key")
    await page.get_by_label("Old secret keeps working for (minutes)").fill("0.5")
    await page.get_by_role("button", name="Rotate").click()
    rotated = (await page.locator("[data-new-key]").inner_text()).strip()
    await expect(page.locator("section.notice")).to_contain_text("keeps working until")
    until = await page.locator("[data-old-secret]").inner_text()
    assert until.count(":") == 2  # to the second: hh:mm:ss
    assert await chat(busy, rotated) in (200, 429)  # logged either way, as a refusal too
    await busy.flush_usage()

    await page.goto(f"{base}/admin/ui/requests?key={secret[:10]}")
    prefixes = await page.locator("table[data-requests] [data-prefix]").all_inner_texts()
    assert secret[:10] in prefixes and rotated[:10] in prefixes  # each line its own
    await honest_at_each_width(page, artifacts, "requests")
    await page.goto(f"{base}/admin/ui/keys?q={secret[:10]}")
    await expect(page.locator("table[data-keys] tbody tr")).to_have_count(1)

    await page.goto(f"{base}/admin/ui/requests?status=502")
    await page.locator("table[data-requests] tbody tr a").first.click()
    await expect(page.locator("[data-failure]")).to_contain_text("The upstream answered 502")
    await expect(page.locator("[data-request]")).not_to_contain_text("Model that answered")
    assert CHANNEL_KEY not in await page.content()
    await honest_at_each_width(page, artifacts, "failed-call")

    await page.goto(f"{base}/admin/ui/groups")
    row = page.locator("table tbody tr", has_text="spent")
    await expect(row.locator("[data-budget-state=over]")).to_contain_text("over budget")
    await honest_at_each_width(page, artifacts, "groups")
    await page.goto(f"{base}/admin/ui/groups/{TENANT}")
    await expect(page.locator("#keys table")).to_contain_text("2 req/min")
    await honest_at_each_width(page, artifacts, "group")

    await page.goto(f"{base}/admin/ui/usage?by=key")
    await honest_at_each_width(page, artifacts, "usage")
    await page.goto(f"{base}/admin/ui/audit")
    options = await page.locator("select[name=action] option").evaluate_all(
        "options => options.map((o) => o.value)"
    )
    assert {"channel.create", "account.update", "alert.budget.group"} <= set(options)
    await page.goto(f"{base}/admin/ui/requests")
    statuses = await page.locator("select[name=status] option").all_inner_texts()
    assert "403" in statuses
    await context.close()
