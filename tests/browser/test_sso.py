"""Single sign-on in Chromium against a real OpenID Connect provider: node-oidc-provider
(``tests/browser/oidc/``, a certified implementation) with a confidential client that
must use PKCE, and users whose ``groups`` claim Parley maps to its roles.

An administrator clicks "Sign in with …", signs in at the provider, and lands on the
dashboard with the mapped role (a viewer sees nothing that changes anything), the
account made at the first sign-in where that is on; a user whose groups map to no role
gets a page that says so; with local sign-in off the login page offers single sign-on
alone and the admin token opens nothing.

The provider's packages are pinned by ``tests/browser/oidc/package-lock.json``; the first
run installs them (``npm ci``) when ``node_modules`` is missing. Without Node and npm
the tests are skipped, naming why (``PARLEY_REQUIRE_SERVICES=1``, as in CI, makes that
a failure).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, Page, expect

from parley.domain.accounts import Account
from parley.domain.audit import AuditQuery
from tests.api.harness import CHANNEL_KEY, Gateway, default_config
from tests.browser.conftest import ADMIN_TOKEN
from tests.browser.test_accessibility import severe_violations
from tests.upstreams.openai_compatible import FakeEngine

HERE = Path(__file__).parent / "oidc"
CLIENT_ID = "parley-dashboard"
CLIENT_SECRET = "oidc-client-secret-for-browser-tests-5522"
PASSWORDS = {"ada": "ada-password", "vic": "vic-password", "eve": "eve-password"}
PROVIDER_NAME = "Example ID"
ROLES = {"parley-admins": "owner", "parley-ops": "operator", "parley-viewers": "viewer"}


@pytest.fixture(scope="session")
def node() -> str:
    found, npm = shutil.which("node"), shutil.which("npm")
    if found is None or npm is None:
        pytest.skip("Node.js and npm are needed to run node-oidc-provider for the SSO tests")
    with (HERE / ".install-lock").open("w") as lock:  # one install among test workers
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (HERE / "node_modules" / "oidc-provider").is_dir():
            command = [npm, "ci", "--no-audit", "--no-fund"]
            subprocess.run(command, cwd=HERE, check=True, timeout=600)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def provider(node: str, redirect_uri: str) -> AsyncIterator[str]:
    """node-oidc-provider, running until the block ends; yields its issuer."""
    env = {
        **os.environ,
        "OIDC_CLIENT_ID": CLIENT_ID,
        "OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_REDIRECT_URI": redirect_uri,
    }
    process = await asyncio.create_subprocess_exec(
        node,
        str(HERE / "provider.mjs"),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=30)
        kind, _, issuer = line.decode().strip().partition(" ")
        assert kind == "issuer", f"node-oidc-provider did not start: {line!r}"
        yield issuer
    finally:
        process.terminate()
        await process.wait()


@dataclass
class Setup:
    gateway: Gateway
    issuer: str

    @property
    def base(self) -> str:
        return self.gateway.base_url


Start = Callable[..., Awaitable[Setup]]


@pytest.fixture
async def start(node: str, tmp_path: Path) -> AsyncIterator[Start]:
    """``await start(**oidc_overrides, local_sign_in=…)``: the provider and a gateway
    whose dashboard signs in through it."""
    opened: list[Any] = []

    async def begin(*, local_sign_in: bool = True, **oidc: Any) -> Setup:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        issuer_context = provider(node, f"{base}/admin/sso/callback")
        issuer = await issuer_context.__aenter__()
        opened.append(issuer_context)
        engine = FakeEngine(api_key=CHANNEL_KEY)
        await engine.__aenter__()
        opened.append(engine)
        config = default_config(engine.base_url, tmp_path)
        config["admin"] = {
            "token": ADMIN_TOKEN,
            "local_sign_in": local_sign_in,
            "oidc": {
                "issuer": issuer,
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "name": PROVIDER_NAME,
                "scopes": ["openid", "profile", "email", "groups"],
                "roles": ROLES,
                "redirect_base_url": base,
                **oidc,
            },
        }
        gateway = await Gateway.start(config, port=port)
        opened.append(gateway)
        return Setup(gateway, issuer)

    yield begin
    for thing in reversed(opened):
        if isinstance(thing, Gateway):
            await thing.stop()
        else:
            await thing.__aexit__(None, None, None)


async def sign_in_at_provider(page: Page, setup: Setup, name: str) -> None:
    """From Parley's login page, through the provider's sign-in and consent pages."""
    await page.goto(f"{setup.base}/admin/login")
    await page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").click()
    await page.wait_for_url(f"{setup.issuer}/interaction/**")
    await page.locator("input[name=login]").fill(name)
    await page.locator("input[name=password]").fill(PASSWORDS[name])
    await page.get_by_role("button", name="Sign-in").click()
    await page.get_by_role("button", name="Continue").click()


async def audit_actions(setup: Setup, actor: str) -> list[str]:
    entries = await setup.gateway.services.store.list_audit(query=AuditQuery(actor=actor))
    return [entry.action for entry in reversed(entries)]


async def test_a_viewer_signs_in_with_the_provider_and_changes_nothing(
    browser: Browser, start: Start
) -> None:
    setup = await start(create_accounts=True)
    context = await browser.new_context()
    page = await context.new_page()
    await sign_in_at_provider(page, setup, "vic")
    await expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    await expect(page.locator(".whoami")).to_have_text("vic · viewer")
    account = await setup.gateway.services.store.get_account("vic")
    assert account is not None
    assert (account.role, account.sso_subject) == ("viewer", f"{setup.issuer} vic")
    for path in ("/admin/ui/groups", "/admin/ui/channels", "/admin/ui/keys"):
        await page.goto(f"{setup.base}{path}")
        assert await page.locator("main form[method=post]").count() == 0, path
    # a change posted by hand, with the session's own CSRF token, is refused too
    csrf = await page.locator("form.signout input[name=csrf]").get_attribute("value")
    reply = await page.request.post(
        f"{setup.base}/admin/ui/groups", form={"csrf": csrf or "", "name": "sneaky"}
    )
    assert reply.status == 403
    assert await setup.gateway.services.store.get_group("sneaky") is None
    assert await audit_actions(setup, "vic") == ["account.create", "session.login"]
    # the password form cannot sign the account in: it has none
    await page.get_by_role("button", name="Sign out").click()
    await page.get_by_label("Account name").fill("vic")
    await page.get_by_label("Password or admin token").fill(PASSWORDS["vic"])
    await page.get_by_role("button", name="Sign in", exact=True).click()
    await expect(page.get_by_role("alert")).to_contain_text("do not match an account")
    await context.close()


async def test_an_owner_gets_the_owners_pages_and_the_role_follows_the_claim(
    browser: Browser, start: Start
) -> None:
    setup = await start(create_accounts=True)
    store = setup.gateway.services.store
    context = await browser.new_context()
    page = await context.new_page()
    await sign_in_at_provider(page, setup, "ada")
    await expect(page.locator(".whoami")).to_have_text("ada · owner")
    await (
        page.get_by_role("navigation", name="Main")
        .get_by_role("link", name="Administrators")
        .click()
    )
    await expect(page.locator("tr[data-account=ada]")).to_contain_text("single sign-on")
    await page.get_by_role("button", name="Sign out").click()
    await context.close()
    # an owner demotes the account here; the provider's claim gives the role back
    await store.update_account("ada", {"role": "viewer"})
    context = await browser.new_context()
    page = await context.new_page()
    await sign_in_at_provider(page, setup, "ada")
    await expect(page.locator(".whoami")).to_have_text("ada · owner")
    await context.close()


async def test_a_user_of_no_mapped_group_is_refused_with_a_page_that_says_why(
    browser: Browser, start: Start
) -> None:
    setup = await start(create_accounts=True)
    context = await browser.new_context()
    page = await context.new_page()
    await sign_in_at_provider(page, setup, "eve")
    await expect(page.get_by_role("heading", name="Sign-in refused")).to_be_visible()
    await expect(page.get_by_role("alert")).to_contain_text("'groups' value that gives a role")
    assert await severe_violations(Axe(), page) == []
    assert await setup.gateway.services.store.get_account("eve") is None
    assert await audit_actions(setup, "eve") == ["session.sso_refused"]
    await page.goto(f"{setup.base}/admin/")
    await expect(page).to_have_url(f"{setup.base}/admin/login")  # no session
    await context.close()


async def test_a_replayed_answer_is_refused(browser: Browser, start: Start) -> None:
    setup = await start(create_accounts=True)
    context = await browser.new_context()
    page = await context.new_page()
    answers: list[str] = []
    callback = f"{setup.base}/admin/sso/callback"
    page.on(
        "request",
        lambda request: answers.append(request.url) if request.url.startswith(callback) else None,
    )
    await sign_in_at_provider(page, setup, "vic")
    await expect(page.locator(".whoami")).to_have_text("vic · viewer")
    assert len(answers) == 1
    await page.goto(answers[0])  # the same code and state again
    await expect(page.get_by_role("heading", name="Sign-in refused")).to_be_visible()
    await expect(page.get_by_role("alert")).to_contain_text("did not start here")
    await context.close()


async def test_with_local_sign_in_off_only_single_sign_on_opens_the_dashboard(
    browser: Browser, start: Start
) -> None:
    setup = await start(create_accounts=False, local_sign_in=False)
    store = setup.gateway.services.store
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{setup.base}/admin/login")
    assert await page.get_by_label("Password or admin token").count() == 0
    assert await severe_violations(Axe(), page) == []
    async with httpx.AsyncClient() as client:
        token = await client.get(
            f"{setup.base}/admin/groups", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        posted = await client.post(
            f"{setup.base}/admin/login", data={"account": "", "token": ADMIN_TOKEN}
        )
    assert token.status_code == 401 and "local_sign_in" in token.text
    assert posted.status_code == 403
    # accounts are not made at the first sign-in here: ada is refused until an owner
    # makes her account for single sign-on (no password), then bound at her sign-in
    await sign_in_at_provider(page, setup, "ada")
    await expect(page.get_by_role("alert")).to_contain_text("There is no account 'ada'")
    await context.close()
    now = datetime.now(UTC)
    await store.add_account(Account("ada", "viewer", "", now, now))
    context = await browser.new_context()
    page = await context.new_page()
    await sign_in_at_provider(page, setup, "ada")
    await expect(page.locator(".whoami")).to_have_text("ada · owner")
    bound = await store.get_account("ada")
    assert bound is not None and bound.sso_subject == f"{setup.issuer} ada"
    await context.close()
