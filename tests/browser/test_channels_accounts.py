"""An owner adds a channel in the browser, tests it and cuts it; a viewer sees no
control that changes anything. Debian's Chromium; every page at 1280 and 390 px."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from playwright.async_api import Browser, Page, expect

from parley.admin.passwords import hash_password_now
from parley.domain.accounts import Account, Role
from tests.api.harness import CHANNEL_KEY, Gateway, default_config
from tests.browser.conftest import ADMIN_TOKEN
from tests.upstreams.openai_compatible import FakeEngine

SPARE_KEY = "sk-browser-spare-credential-7781"
PASSWORDS = {"olivia": "owner-password-123", "vera": "viewer-password-123"}
ASK_SPARE = {"model": "unserved", "messages": [{"role": "user", "content": "hi"}]}
WIDTHS = {"wide": (1280, 900), "narrow": (390, 844)}
LONG_NAME = "a-rather-long-administrator-name-0123456789-abcdefghijklmnopqrst"
"""64 characters, the longest name an account may have."""


async def snap(page: Page, folder: Path, name: str) -> None:
    """A full-page screenshot at each width; no page shows a secret or scrolls sideways."""
    html = await page.content()
    for secret in (ADMIN_TOKEN, CHANNEL_KEY, SPARE_KEY, *PASSWORDS.values()):
        assert secret not in html
    for width, (w, h) in WIDTHS.items():
        await page.set_viewport_size({"width": w, "height": h})
        overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, f"{name} scrolls sideways at {w} px"
        await page.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)
    await page.set_viewport_size({"width": 1280, "height": 900})


@pytest.fixture
async def staffed(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with FakeEngine(api_key=CHANNEL_KEY) as engine:
        config = default_config(engine.base_url, tmp_path)
        config["admin"] = {"token": ADMIN_TOKEN, "secret_keys": [Fernet.generate_key().decode()]}
        gateway = await Gateway.start(config)
        now = datetime.now(UTC)
        roles: dict[str, Role] = {"olivia": "owner", "vera": "viewer"}
        for name, role in roles.items():
            hashed = hash_password_now(PASSWORDS[name])
            await gateway.services.store.add_account(Account(name, role, hashed, now, now))
        try:
            yield gateway
        finally:
            await gateway.stop()


async def nav(page: Page, name: str) -> None:
    await page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()


async def sign_in(page: Page, base: str, name: str) -> None:
    await page.goto(f"{base}/admin/login")
    await page.get_by_label("Account name").fill(name)
    await page.get_by_label("Password or admin token").fill(PASSWORDS[name])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Overview")).to_be_visible()


async def spare_status(page: Page, base: str, key: str) -> int:
    reply = await page.request.post(
        f"{base}/v1/chat/completions",
        data=ASK_SPARE,
        headers={"Authorization": f"Bearer {key}"},
    )
    return reply.status


async def test_an_owner_adds_tests_and_cuts_a_channel_and_a_viewer_only_looks(
    browser: Browser, staffed: Gateway, artifacts: Path
) -> None:
    base = staffed.base_url
    key = await staffed.key(await staffed.group("acme"))
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())

    await sign_in(page, base, "olivia")
    await expect(page.locator("[data-role]")).to_have_text("olivia · owner")
    assert await spare_status(page, base, key) == 503

    async with FakeEngine(api_key=SPARE_KEY) as spare:
        await nav(page, "Channels")
        form = page.locator("#add")
        await form.get_by_label("Name", exact=True).fill("spare")
        await form.get_by_label("Base URL").fill(spare.base_url)
        await form.get_by_label("API key").fill("sk-too-short")
        await form.get_by_label("Models").fill("no-such-model")
        await form.get_by_role("button", name="Add channel").click()
        await expect(page.get_by_role("alert")).to_contain_text("not a model declared")
        name = form.get_by_label("Name", exact=True)
        await expect(name).to_have_value("spare")  # the input is kept
        await snap(page, artifacts, "channels-add-error")

        await form.get_by_label("API key").fill(SPARE_KEY)
        await form.get_by_label("Models").fill("unserved = spare-upstream")
        await form.get_by_role("button", name="Add channel").click()
        await expect(page.get_by_role("heading", name="spare", exact=True)).to_be_visible()
        await expect(page.locator("dl.facts")).to_contain_text("…7781")
        assert await spare_status(page, base, key) == 200

        await page.get_by_role("button", name="Test").click()
        result = page.locator("[data-test-result]")
        await expect(result).to_have_attribute("data-test-result", "ok")
        await expect(result).to_contain_text("unserved: HTTP 200 in")
        await expect(page.locator("table[data-history]")).to_contain_text("ok (HTTP 200)")
        await snap(page, artifacts, "channel-tested")

        await page.get_by_role("button", name="Disable channel").click()
        await expect(page.locator(".title-row .pill.off")).to_have_text("disabled")
        assert await spare_status(page, base, key) == 503
        await page.get_by_role("button", name="Test").click()  # a disabled channel still tests
        await expect(page.locator("[data-test-result]")).to_have_attribute("data-test-result", "ok")
        await snap(page, artifacts, "channel-disabled")

    await page.get_by_role("button", name="Enable channel").click()
    await page.get_by_role("button", name="Test").click()  # its engine is gone now
    result = page.locator("[data-test-result]")
    await expect(result).to_have_attribute("data-test-result", "failed")
    await expect(result).to_contain_text("HTTP 502")

    await nav(page, "Channels")
    await expect(page.locator("[data-channel=engine]")).to_contain_text("config file")
    await expect(page.locator("[data-channel=spare]")).to_contain_text("managed here")
    await snap(page, artifacts, "channels-live")
    await nav(page, "Administrators")
    await expect(page.locator("table[data-accounts]")).to_contain_text("vera")
    await snap(page, artifacts, "administrators")
    await nav(page, "Audit log")
    for action in ("channel.create", "channel.test", "channel.disable"):
        await expect(page.locator("table")).to_contain_text(action)
    await expect(page.locator("table")).to_contain_text("olivia")
    await page.get_by_role("button", name="Sign out").click()

    await sign_in(page, base, "vera")
    for path in (
        "/admin/ui/channels",
        "/admin/ui/channels/spare",
        "/admin/ui/groups",
        "/admin/ui/groups/acme",
    ):
        await page.goto(f"{base}{path}")
        posting = page.locator("main form[method=post]")
        assert await posting.count() == 0, path
    await page.goto(f"{base}/admin/ui/channels/spare")
    await snap(page, artifacts, "channel-viewer")
    assert await page.get_by_role("link", name="Administrators").count() == 0
    await page.goto(f"{base}/admin/ui/accounts")
    await expect(page.locator("main")).to_contain_text("viewer")
    await context.close()


async def test_an_administrators_row_keeps_its_controls_on_one_line(
    browser: Browser, staffed: Gateway, artifacts: Path
) -> None:
    """At 1280 px each administrator's controls (role, new password, Save, Disable,
    Delete) sit on the row's one line, whatever the length of the name beside them:
    Delete does not drop under the role select. At 390 px they wrap, and the page still
    does not scroll sideways."""
    now = datetime.now(UTC)
    hashed = hash_password_now("operator-password-123")
    await staffed.services.store.add_account(Account(LONG_NAME, "operator", hashed, now, now))
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await sign_in(page, staffed.base_url, "olivia")
    await nav(page, "Administrators")
    for name in (*PASSWORDS, LONG_NAME):
        row = page.locator(f"tr[data-account={name}]")
        role = await row.get_by_label("Role").bounding_box()
        delete = await row.get_by_role("button", name="Delete").bounding_box()
        assert role is not None and delete is not None
        assert delete["x"] > role["x"] + role["width"], (name, role, delete)
        # on the same line: each one's vertical middle within the other's height
        role_middle = role["y"] + role["height"] / 2
        delete_middle = delete["y"] + delete["height"] / 2
        assert role["y"] <= delete_middle <= role["y"] + role["height"], (name, role, delete)
        assert delete["y"] <= role_middle <= delete["y"] + delete["height"], (name, role, delete)
        assert delete["height"] < role["height"], "Delete's word is cut over two lines"
        controls = [row.get_by_label("Role"), row.get_by_label("New password")]
        controls += [row.get_by_role("button", name=n) for n in ("Save", "Disable", "Delete")]
        boxes = [await control.bounding_box() for control in controls]
        for left, right in itertools.pairwise(boxes):
            assert left is not None and right is not None
            assert left["x"] + left["width"] <= right["x"], (name, "controls overlap")
    clipped = await page.locator(".table-wrap").evaluate("e => e.scrollWidth - e.clientWidth")
    assert clipped <= 1, "the table scrolls sideways inside its card"
    await snap(page, artifacts, "administrators-rows")
    await context.close()
