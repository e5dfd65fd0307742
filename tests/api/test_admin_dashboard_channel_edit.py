"""The dashboard's channel settings form over plain HTTP: a change that fails shows the
form again with what the operator typed (not the stored settings) and the error beside
the field it names; the stored channel is left as it was, and a typed credential is
never sent back."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import aiohttp
from cryptography.fernet import Fernet

from tests.api.admin_client import ADMIN, browser_session, call, form_token, login
from tests.api.harness import Gateway
from tests.upstreams.openai_compatible import FakeEngine

SECRET_KEY = Fernet.generate_key().decode()
STORED_KEY = "sk-stored-channel-credential-58"
TYPED_KEY = "sk-typed-credential-0123456789"
PAGE = "/admin/ui/channels/spare"


async def channel_gateway(start_gateway: Any, engine: FakeEngine) -> Gateway:
    gateway: Gateway = await start_gateway(
        lambda c: c.update(admin={"token": ADMIN, "secret_keys": [SECRET_KEY]})
    )
    body = {
        "name": "spare",
        "base_url": engine.base_url,
        "api_key": STORED_KEY,
        "priority": 3,
        "models": [{"name": "unserved", "upstream": "spare-model"}],
    }
    assert (await call(gateway, "POST", "/admin/channels", body=body))[0] == 201
    return gateway


def field(html: str, tag: str, name: str) -> str:
    found = re.search(rf'<{tag} id="channel-{name}"[^>]*>', html)
    assert found, f"no {tag} channel-{name}"
    return found.group(0)


def textarea(html: str) -> str:
    found = re.search(r'<textarea id="channel-models"[^>]*>([^<]*)</textarea>', html)
    assert found, "no models textarea"
    return found.group(1)


async def send(session: aiohttp.ClientSession, base: str, form: dict[str, str]) -> tuple[int, str]:
    async with session.post(f"{base}{PAGE}", data=form, allow_redirects=False) as reply:
        return reply.status, await reply.text()


async def test_a_failed_change_keeps_what_was_typed_with_the_error_in_place(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await channel_gateway(start_gateway, engine)
    base = gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        csrf = await form_token(session, base)
        async with session.get(f"{base}{PAGE}") as fresh:
            html = await fresh.text()
        assert f'value="{engine.base_url}"' in field(html, "input", "base_url")
        assert textarea(html) == "unserved = spare-model"
        assert 'value="3"' in field(html, "input", "priority")
        assert "aria-invalid" not in html

        typed = {
            "csrf": csrf,
            "type": "openai",
            "base_url": "http://127.0.0.1:9/typed/v1",
            "models": "unserved = typed-model\nchat-large",
            "priority": "high",
            "weight": "7",
        }
        status, html = await send(session, base, typed)
        assert status == 400
        priority = field(html, "input", "priority")
        assert 'value="high"' in priority and 'aria-invalid="true"' in priority
        assert 'id="channel-priority-error"' in html and "Priority must be a whole number" in html
        assert 'value="http://127.0.0.1:9/typed/v1"' in field(html, "input", "base_url")
        assert textarea(html) == "unserved = typed-model\nchat-large"
        assert 'value="7"' in field(html, "input", "weight")
        assert engine.base_url not in field(html, "input", "base_url")

        status, html = await send(session, base, {**typed, "priority": "1", "models": "ghost"})
        assert status == 400
        assert 'aria-invalid="true"' in field(html, "textarea", "models")
        assert (
            'id="channel-models-error"' in html
            and "'ghost' is not a model declared" in unescape(html)
        )
        assert textarea(html) == "ghost" and 'value="1"' in field(html, "input", "priority")

        status, html = await send(
            session, base, {**typed, "priority": "1", "api_key": f"{TYPED_KEY}\nx"}
        )
        assert status == 400
        key_field = field(html, "input", "api_key")
        assert 'aria-invalid="true"' in key_field and "value=" not in key_field
        assert "'api_key' must be one line of text" in unescape(html)
        assert TYPED_KEY not in html and STORED_KEY not in html

        status, html = await send(session, base, {**typed, "type": "no-such-type", "priority": "1"})
        assert status == 400 and "Unknown channel type 'no-such-type'" in unescape(html)
        assert 'aria-invalid="true"' in field(html, "select", "type")

    status, stored = await call(gateway, "GET", "/admin/channels/spare")
    assert status == 200
    assert (stored["base_url"], stored["priority"]) == (engine.base_url, 3)
    assert [m["upstream"] for m in stored["models"]] == ["spare-model"]


async def test_a_change_that_passes_is_saved_and_the_form_shows_it(
    start_gateway: Any, engine: FakeEngine
) -> None:
    gateway = await channel_gateway(start_gateway, engine)
    base = gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        csrf = await form_token(session, base)
        form = {
            "csrf": csrf,
            "type": "openai",
            "base_url": engine.base_url,
            "models": "unserved = other-model",
            "priority": "5",
            "weight": "2",
        }
        status, _ = await send(session, base, form)
        assert status == 303
        async with session.get(f"{base}{PAGE}") as page:
            html = await page.text()
        assert textarea(html) == "unserved = other-model"
        assert 'value="5"' in field(html, "input", "priority")
    status, stored = await call(gateway, "GET", "/admin/channels/spare")
    assert stored["priority"] == 5 and stored["key_hint"] == "…l-58"
