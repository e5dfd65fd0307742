"""/admin refuses everything but the admin token, brakes guessing, never shows a secret,
and sends its security headers on every reply."""

from __future__ import annotations

import logging
import re
from typing import Any

import aiohttp
import pytest
from pydantic import ValidationError
from yarl import URL

from parley.settings import Settings
from tests.api.admin_client import (
    ADMIN,
    admin_gateway,
    browser_session,
    call,
    chat_status,
    form_token,
    login,
)
from tests.api.harness import CHANNEL_KEY, Gateway


async def test_only_a_bearer_admin_token_opens_the_api(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    group = await gateway.group("team")
    group_key = await gateway.key(group)
    refused = [
        {"Authorization": ADMIN},  # the bare token
        {"Authorization": f"Basic {ADMIN}"},
        {"Authorization": f"Bearer  {ADMIN} extra"},
        {"Authorization": f"Bearer {group_key}"},  # a group's key is no admin token
    ]
    for headers in refused:
        status, error = await call(gateway, "GET", "/admin/groups", token=None, headers=headers)
        assert status == 401, headers
        assert error["error"]["code"] == "invalid_api_key"
    assert (
        await call(
            gateway,
            "GET",
            "/admin/groups",
            token=None,
            headers={"Authorization": f"bearer {ADMIN}"},
        )
    )[0] == 200


async def audited(gateway: Gateway, action: str) -> list[tuple[str, str]]:
    entries = await gateway.services.store.list_audit()
    return [(entry.actor, entry.target) for entry in entries if entry.action == action]


async def test_guessing_the_token_is_braked_per_address(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    for _ in range(5):
        assert (await call(gateway, "GET", "/admin/groups", token="guess"))[0] == 401
    for _ in range(2):
        status, error = await call(gateway, "GET", "/admin/groups", token="guess")
        assert status == 429
        assert "Too many failed sign-in attempts" in error["error"]["message"]
    assert (await call(gateway, "GET", "/admin/groups"))[0] == 200  # the right token gets in
    assert (await call(gateway, "GET", "/admin/groups", token="guess"))[0] == 429
    assert await audited(gateway, "session.locked_out") == [("token", "127.0.0.1")]
    assert len(await audited(gateway, "session.login_failed")) == 5


async def test_requests_without_credentials_lock_nobody_out(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    for headers in [{}, {"Authorization": ""}] * 5:
        status, _ = await call(gateway, "GET", "/admin/groups", token=None, headers=headers)
        assert status == 401
    for path in ("/admin/x%0aFORGED", "/admin/keys", "/admin/audit"):
        assert (await call(gateway, "GET", path, token=None))[0] == 401
    assert (await call(gateway, "GET", "/admin/groups"))[0] == 200
    for _ in range(4):
        assert (await call(gateway, "GET", "/admin/groups", token="guess"))[0] == 401
    assert await audited(gateway, "session.locked_out") == []


async def test_login_form_is_braked_with_a_clear_message(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    async with browser_session() as session:
        for _ in range(5):
            assert (await login(session, gateway.base_url, "")).status == 401  # counts nothing
        for _ in range(5):
            assert (await login(session, gateway.base_url, "wrong")).status == 401
        blocked = await login(session, gateway.base_url, "wrong again")
        assert blocked.status == 429
        assert "Too many failed sign-in attempts" in await blocked.text()
        async with session.get(f"{gateway.base_url}/admin/login") as page:
            assert page.status == 200
        assert (await login(session, gateway.base_url, ADMIN)).status == 303  # never refused
    assert await audited(gateway, "session.locked_out") == [("token", "127.0.0.1")]
    async with browser_session() as session:
        response = await session.post(
            f"{gateway.base_url}/admin/login", data={"token": ADMIN}, allow_redirects=False
        )
        assert response.status == 403  # no form nonce: a forged post, not a sign-in


async def test_session_cookie_is_signed_httponly_strict_and_holds_no_token(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    async with browser_session() as session:
        response = await login(session, gateway.base_url, ADMIN)
        assert response.status == 303 and response.headers["Location"] == "/admin/"
        cookie = response.cookies["parley_admin"]
        assert cookie["httponly"] and cookie["samesite"] == "Strict"
        assert cookie["path"] == "/admin" and int(cookie["max-age"]) > 0
        assert ADMIN not in cookie.value
        # a redirect raised past the gateway middleware still leaves with its request id
        async with session.get(f"{gateway.base_url}/admin", allow_redirects=False) as moved:
            assert moved.status == 303 and moved.headers["x-request-id"].startswith("req_")
        async with session.get(f"{gateway.base_url}/admin/ui/groups") as page:
            assert page.status == 200 and "New group" in await page.text()
    jar = aiohttp.CookieJar(unsafe=True)
    tampered = ("A" if cookie.value[0] != "A" else "B") + cookie.value[1:]
    jar.update_cookies({"parley_admin": tampered})
    async with (
        aiohttp.ClientSession(cookie_jar=jar) as tampered,
        tampered.get(f"{gateway.base_url}/admin/ui/groups", allow_redirects=False) as page,
    ):
        assert page.status == 303 and page.headers["Location"] == "/admin/login"


async def test_logout_ends_the_session_and_forms_need_the_csrf_token(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    base = gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        async with session.post(f"{base}/admin/ui/groups", data={"name": "x"}) as forged:
            assert forged.status == 403
            assert "did not come from this dashboard" in await forged.text()
        cookie = session.cookie_jar.filter_cookies(URL(f"{base}/admin/"))["parley_admin"].value
        csrf = await form_token(session, base)
        async with session.post(f"{base}/admin/logout", data={"csrf": csrf}) as out:
            assert out.url.path == "/admin/login"
    jar = aiohttp.CookieJar(unsafe=True)
    jar.update_cookies({"parley_admin": cookie})
    async with (
        aiohttp.ClientSession(cookie_jar=jar) as replay,
        replay.get(f"{base}/admin/ui/groups", allow_redirects=False) as page,
    ):
        assert page.status == 303  # the logged-out session no longer opens pages
    assert await gateway.services.store.get_group("x") is None


async def test_every_admin_reply_carries_the_security_headers(start_gateway: Any) -> None:
    gateway = await admin_gateway(start_gateway)
    async with browser_session() as session:
        for path in (
            "/admin/login",
            "/admin/groups",
            "/admin/ui/groups",
            "/admin/static/admin.css",
        ):
            async with session.get(f"{gateway.base_url}{path}", allow_redirects=False) as reply:
                csp = reply.headers["Content-Security-Policy"]
                assert "script-src 'self'" in csp and "unsafe-inline" not in csp, path
                assert reply.headers["X-Frame-Options"] == "DENY", path
                assert reply.headers["Referrer-Policy"] == "no-referrer", path


async def test_no_reply_or_log_line_shows_a_secret(
    start_gateway: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    gateway: Gateway = await admin_gateway(start_gateway)
    await call(gateway, "POST", "/admin/groups", body={"name": "team"})
    _, created = await call(gateway, "POST", "/admin/keys", body={"group": "team"})
    secret = created["key"]
    assert (await chat_status(gateway, secret))[0] == 200
    replies = [
        await call(gateway, "GET", path)
        for path in ("/admin/keys", "/admin/groups/team", "/admin/channels", "/admin/audit")
    ]
    async with browser_session() as session:
        await login(session, gateway.base_url, ADMIN)
        for path in ("/admin/", "/admin/ui/groups/team", "/admin/ui/channels", "/admin/ui/audit"):
            async with session.get(f"{gateway.base_url}{path}") as page:
                replies.append((page.status, await page.text()))
    text = repr(replies) + caplog.text
    for forbidden in (secret, CHANNEL_KEY, ADMIN):
        assert forbidden not in text
    assert created["prefix"] in repr(replies)  # keys are shown by prefix


async def session_cookie(gateway: Gateway, headers: dict[str, str]) -> Any:
    """Sign in through the form with ``headers`` on every request: the session cookie.
    The login cookie is sent back by hand: a client keeps no ``Secure`` cookie over HTTP,
    where a browser behind the TLS proxy would."""
    base = gateway.base_url
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as session:
        async with session.get(f"{base}/admin/login", headers=headers) as page:
            nonce = re.search(r'name="nonce" value="([^"]+)"', await page.text())
            assert nonce is not None
            login_cookie = page.cookies["parley_login"]
        form = {"nonce": nonce.group(1), "token": ADMIN}
        async with session.post(
            f"{base}/admin/login",
            data=form,
            headers={**headers, "Cookie": f"parley_login={login_cookie.value}"},
            allow_redirects=False,
        ) as signed_in:
            assert signed_in.status == 303
            cookie = signed_in.cookies["parley_admin"]
    assert bool(login_cookie["secure"]) == bool(cookie["secure"])
    return cookie


HTTPS = {"X-Forwarded-Proto": "https"}


@pytest.mark.parametrize(
    ("admin", "headers", "secure"),
    [
        ({}, {}, False),
        ({}, HTTPS, False),  # anyone may send the header: believed from trusted proxies only
        ({"trusted_proxies": ["10.0.0.0/8"]}, HTTPS, False),  # 127.0.0.1 is not one
        ({"trusted_proxies": ["127.0.0.1"]}, HTTPS, True),
        ({"trusted_proxies": ["127.0.0.0/8"]}, {"X-Forwarded-Proto": "HTTPS, http"}, True),
        ({"trusted_proxies": ["127.0.0.1"]}, {"X-Forwarded-Proto": "http"}, False),
        ({"trusted_proxies": ["127.0.0.1"]}, {}, False),
        ({"secure_cookies": "always"}, {}, True),
    ],
    ids=[
        "plain",
        "untrusted-header",
        "other-proxy",
        "trusted-proxy",
        "trusted-network",
        "trusted-http",
        "trusted-no-header",
        "always",
    ],
)
async def test_the_session_cookie_is_secure_behind_a_trusted_tls_proxy(
    start_gateway: Any, admin: dict[str, Any], headers: dict[str, str], secure: bool
) -> None:
    gateway = await start_gateway(lambda c: c.update(admin={"token": ADMIN, **admin}))
    cookie = await session_cookie(gateway, headers)
    assert bool(cookie["secure"]) is secure


def test_a_trusted_proxy_must_be_an_address_or_a_network() -> None:
    with pytest.raises(ValidationError, match="not an address or network"):
        Settings.model_validate({"admin": {"trusted_proxies": ["proxy.example.com"]}})
