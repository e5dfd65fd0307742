"""Requests no route serves, now that the edge wraps each route instead of running as an
aiohttp middleware (``parley/edge/routing.py``): each is refused behind the same edge as
any call, in the envelope, with its request id, and on ``/admin`` behind the admin's
checks and with its security headers."""

from __future__ import annotations

from typing import Any

import aiohttp

from parley.app import create_app
from parley.settings import Settings
from tests.api.admin_client import ADMIN, admin_gateway
from tests.api.harness import Gateway, call


def test_no_application_runs_an_aiohttp_middleware_chain() -> None:
    """aiohttp runs its chain for every request once any application has a middleware."""
    app = create_app(Settings.model_validate({"admin": {"token": ADMIN}}))
    apps = [app, *(r.get_info()["app"] for r in app.router.resources() if "app" in r.get_info())]
    assert len(apps) == 2  # the gateway and the admin
    assert [list(a.middlewares) for a in apps] == [[], []]


async def test_a_wrong_method_names_the_allowed_ones_in_the_envelope(
    gateway: Gateway, key: str
) -> None:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.delete(f"{gateway.v1}/models") as reply,
    ):
        assert reply.status == 405
        assert set(reply.headers["Allow"].split(",")) == {"GET", "HEAD"}
        assert reply.headers["x-request-id"]
        error = (await reply.json())["error"]
        assert error["code"] == "method_not_allowed"
        assert "DELETE" in error["message"]


async def test_a_path_holding_a_line_break_is_a_404_envelope(gateway: Gateway, key: str) -> None:
    status, payload = await call(gateway, "GET", "/v1/x%0aFORGED", key)
    assert status == 404
    assert set(payload["error"]) == {"message", "type", "param", "code"}


async def test_an_unknown_path_outside_the_api_is_a_404_envelope(gateway: Gateway) -> None:
    for method, path in (("GET", "/"), ("POST", "/nothing"), ("GET", "/health/x")):
        status, payload = await call(gateway, method, path, None)
        assert status == 404, path
        assert set(payload["error"]) == {"message", "type", "param", "code"}
    status, _ = await call(gateway, "POST", "/health", None)
    assert status == 405


async def test_the_admin_refuses_what_it_does_not_serve_after_its_checks(
    start_gateway: Any,
) -> None:
    gateway = await admin_gateway(start_gateway)
    async with aiohttp.ClientSession() as session:
        for method, path, token, status in (
            ("GET", "/admin/nothing", None, 401),  # the checks first: no route is told
            ("GET", "/admin/nothing", ADMIN, 404),
            ("DELETE", "/admin/groups", ADMIN, 405),
            ("GET", "/admin/static/nothing.css", ADMIN, 404),
            ("GET", "/admin/static/..%2fsite.py", ADMIN, 404),
        ):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with session.request(
                method, f"{gateway.base_url}{path}", headers=headers, allow_redirects=False
            ) as reply:
                assert reply.status == status, (method, path)
                assert reply.headers["X-Frame-Options"] == "DENY", path
                if path.startswith("/admin/static") or status == 401:
                    continue
                payload = await reply.json()
                assert set(payload["error"]) == {"message", "type", "param", "code"}
        async with session.get(f"{gateway.base_url}/admin/static/admin.css") as reply:
            assert reply.status == 200
            assert reply.content_type == "text/css"
            assert "body" in await reply.text()
