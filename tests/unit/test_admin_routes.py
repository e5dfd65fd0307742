"""Every route the admin sub-application serves, read from its router: each JSON API
endpoint is in ``docs/admin-api.md`` (and each ``/admin`` endpoint the document names is
served), and each route that changes something has its role in ``parley/admin/roles.py``
(an unlisted one would need ``owner``: closed, but unplanned)."""

from __future__ import annotations

import re
from pathlib import Path

from parley.admin.roles import OPEN_ROUTES, ROUTE_ROLES
from parley.admin.site import admin_app
from parley.app import at_the_edge
from parley.settings import Settings

Route = tuple[str, str]

DOC = Path(__file__).resolve().parents[2] / "docs" / "admin-api.md"
MENTION = re.compile(r"\b(GET|POST|PATCH|DELETE|PUT) /admin(/[A-Za-z0-9_./{}-]*)")
NOT_API = ("/ui/", "/static")
"""The dashboard's pages and files, documented as pages, not as endpoints."""
SESSION = {"", "/", "/login", "/logout"}
READS = ("GET", "HEAD", "OPTIONS")


def served() -> set[Route]:
    app = admin_app(Settings.model_validate({"admin": {"token": "t" * 32}}), at_the_edge)
    found = set()
    for route in app.router.routes():
        if route.method == "*":  # the catch-alls: what no route serves (parley.edge.routing)
            continue
        info = route.resource.get_info() if route.resource is not None else {}
        template = info.get("formatter", info.get("path", info.get("prefix")))
        assert isinstance(template, str), route
        if route.method != "HEAD":
            found.add((route.method, template))
    return found


def shape(path: str) -> str:
    """A path with its parameters unnamed: ``/keys/{key_id}`` and ``/keys/{id}`` are one."""
    return re.sub(r"\{[^}]*\}", "{}", path.rstrip("/."))


def documented(text: str) -> set[Route]:
    return {(method, shape(path)) for method, path in MENTION.findall(text)}


def undocumented(routes: set[Route], text: str) -> list[str]:
    """The JSON API's routes the document never names as ``METHOD /admin/path``."""
    named = documented(text)
    return sorted(
        f"{method} /admin{path}"
        for method, path in routes
        if path not in SESSION
        and not path.startswith(NOT_API)
        and (method, shape(path)) not in named
    )


def unlisted(routes: set[Route]) -> list[Route]:
    """Routes that change something and have no place in the role table."""
    return sorted({(m, p) for m, p in routes if m not in READS} - set(ROUTE_ROLES) - OPEN_ROUTES)


def test_the_router_is_read_whole() -> None:
    routes = served()
    assert ("POST", "/keys/{key_id}/rotate") in routes
    assert ("GET", "/ui/channels/{name}") in routes
    assert len([p for _, p in routes if not p.startswith(NOT_API)]) >= 30


def test_every_admin_api_endpoint_is_in_the_document() -> None:
    text = DOC.read_text(encoding="utf-8")
    routes = served()
    missing = undocumented(routes, text)
    assert not missing, f"not in docs/admin-api.md: {missing}"
    known = {(method, shape(path)) for method, path in routes}
    unknown = sorted(f"{m} /admin{p}" for m, p in documented(text) - known)
    assert not unknown, f"docs/admin-api.md names endpoints no route serves: {unknown}"


def test_every_route_that_changes_something_has_its_role() -> None:
    routes = served()
    assert not unlisted(routes), f"mutating routes missing from ROUTE_ROLES: {unlisted(routes)}"
    stale = sorted(set(ROUTE_ROLES) - routes)
    assert not stale, f"ROUTE_ROLES lists routes nobody serves: {stale}"


def test_the_checks_catch_a_route_they_do_not_know() -> None:
    made_up = {("POST", "/keys/{key_id}/freeze"), ("GET", "/keys/{key_id}/freeze")}
    text = "| `GET /admin/keys/{id}/freeze` | a key's freeze |"
    assert undocumented(made_up, text) == ["POST /admin/keys/{key_id}/freeze"]
    assert unlisted(made_up) == [("POST", "/keys/{key_id}/freeze")]
    assert unlisted({("POST", "/keys/{key_id}/rotate"), ("POST", "/login")}) == []
