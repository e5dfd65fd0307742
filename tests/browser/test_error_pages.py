"""A dashboard address that fails is a page for a person, never the API's JSON envelope:
a form's address opened with GET (a bookmark, a reload after a failed post) and a fault
inside a page (a bug) both answer HTML with the menu, a heading and a way back."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from tests.api.harness import Gateway
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_dashboard import sign_in


async def signed_in(browser: Browser, dashboard: Gateway) -> Page:
    page = await (await browser.new_context(viewport={"width": 1280, "height": 900})).new_page()
    await sign_in(page, dashboard.base_url, ADMIN_TOKEN)
    await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    return page


async def assert_error_page(page: Page, path: str, status: int, heading: str) -> str:
    reply = await page.goto(page.url.split("/admin/")[0] + path)
    assert reply is not None and reply.status == status
    assert reply.headers["content-type"].startswith("text/html")
    await expect(page.get_by_role("heading", name=heading)).to_be_visible()
    await expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    await expect(page.get_by_role("link", name="Go back")).to_be_visible()
    text = await page.inner_text("main")
    assert '"error"' not in text and "Traceback" not in text
    return text


async def test_a_form_address_opened_with_get_is_a_page(
    browser: Browser, dashboard: Gateway
) -> None:
    page = await signed_in(browser, dashboard)
    for path in ("/admin/ui/accounts/olga", "/admin/ui/groups/acme/keys"):
        text = await assert_error_page(page, path, 405, "Not found")
        assert "no such page" in text


async def test_a_fault_inside_a_page_is_a_page_and_is_logged(
    browser: Browser, dashboard: Gateway, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    page = await signed_in(browser, dashboard)

    async def broken(**_: Any) -> Any:  # stands for a bug behind the page
        raise RuntimeError("a fault in the audit query")

    monkeypatch.setattr(dashboard.services.store, "list_audit", broken)
    text = await assert_error_page(page, "/admin/ui/audit", 500, "That did not work")
    assert "server's log" in text and "a fault in the audit query" not in text
    assert any("unhandled error on dashboard page" in r.getMessage() for r in caplog.records)
