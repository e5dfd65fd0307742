"""Calling /admin from tests: the JSON API with a token, and the dashboard with a session."""

from __future__ import annotations

import re
from typing import Any

import aiohttp

from tests.api.harness import Gateway
from tests.api.harness import call as call_as

ADMIN = "admin-token-for-tests-0123456789"
CHAT = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}


async def admin_gateway(start_gateway: Any) -> Gateway:
    gateway: Gateway = await start_gateway(lambda c: c.update(admin={"token": ADMIN}))
    return gateway


async def call(
    gateway: Gateway,
    method: str,
    path: str,
    token: str | None = ADMIN,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """The admin API's answer (status, JSON or text), with the admin token by default."""
    return await call_as(gateway, method, path, token, json=body, headers=headers)


async def chat_status(gateway: Gateway, key: str) -> tuple[int, Any]:
    return await call_as(gateway, "POST", "/v1/chat/completions", key, json=CHAT)


def browser_session() -> aiohttp.ClientSession:
    """A client that keeps cookies for 127.0.0.1 (aiohttp's default jar refuses IPs)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]+)"', html)
    assert found, f"no hidden field {name}"
    return found.group(1)


async def form_token(session: aiohttp.ClientSession, base: str) -> str:
    """The CSRF token the dashboard's forms carry, for a signed-in ``session``."""
    async with session.get(f"{base}/admin/ui/groups") as page:
        return hidden(await page.text(), "csrf")


async def login(session: aiohttp.ClientSession, base: str, token: str) -> aiohttp.ClientResponse:
    """Sign in through the form, as a browser does (the session keeps the cookies)."""
    async with session.get(f"{base}/admin/login") as page:
        nonce = hidden(await page.text(), "nonce")
    response = await session.post(
        f"{base}/admin/login", data={"nonce": nonce, "token": token}, allow_redirects=False
    )
    await response.read()
    return response
