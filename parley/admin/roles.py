"""Who may do what on /admin: the one table of route → least role, for the JSON API and
the dashboard alike (``site.gate`` checks it before any handler runs).

A route is named by its method and its path template under ``/admin``. Reads (``GET``)
need ``viewer`` unless listed; any other method not listed needs ``owner``, so a new
route is closed until it is given its place here. A call's kept content (prompts and
replies, ``CONTENT_ROLE``) is an operator's or the owner's to read, never a viewer's;
the dashboard's request page shows it by the same rule.
"""

from __future__ import annotations

from parley.domain.accounts import Role

OPERATOR: Role = "operator"
OWNER: Role = "owner"
VIEWER: Role = "viewer"

ROUTE_ROLES: dict[tuple[str, str], Role] = {
    # tenants and keys
    ("POST", "/groups"): OPERATOR,
    ("PATCH", "/groups/{name}"): OPERATOR,
    ("POST", "/groups/{name}/disable"): OPERATOR,
    ("POST", "/groups/{name}/enable"): OPERATOR,
    ("POST", "/keys"): OPERATOR,
    ("DELETE", "/keys/{key_id}"): OPERATOR,
    ("PATCH", "/keys/{key_id}"): OPERATOR,
    ("POST", "/keys/{key_id}/rotate"): OPERATOR,
    ("DELETE", "/voices/{model}/{voice_id}"): OPERATOR,
    ("POST", "/ui/groups"): OPERATOR,
    ("POST", "/ui/groups/{name}"): OPERATOR,
    ("POST", "/ui/groups/{name}/disable"): OPERATOR,
    ("POST", "/ui/groups/{name}/enable"): OPERATOR,
    ("POST", "/ui/groups/{name}/content"): OPERATOR,
    ("POST", "/ui/groups/{name}/keys"): OPERATOR,
    ("POST", "/ui/keys/{key_id}/revoke"): OPERATOR,
    ("POST", "/ui/keys/{key_id}"): OPERATOR,
    ("POST", "/ui/keys/{key_id}/rotate"): OPERATOR,
    ("POST", "/ui/voices/{model}/{voice_id}/delete"): OPERATOR,
    # calls' kept content: prompts and replies are not a viewer's to read
    ("GET", "/requests/{request_id}/content"): OPERATOR,
    # channels
    ("POST", "/channels"): OPERATOR,
    ("PATCH", "/channels/{name}"): OPERATOR,
    ("POST", "/channels/{name}/disable"): OPERATOR,
    ("POST", "/channels/{name}/enable"): OPERATOR,
    ("DELETE", "/channels/{name}"): OPERATOR,
    ("POST", "/channels/{name}/test"): OPERATOR,
    ("POST", "/channels/reseal"): OWNER,
    ("POST", "/ui/channels"): OPERATOR,
    ("POST", "/ui/channels/{name}"): OPERATOR,
    ("POST", "/ui/channels/{name}/disable"): OPERATOR,
    ("POST", "/ui/channels/{name}/enable"): OPERATOR,
    ("POST", "/ui/channels/{name}/delete"): OPERATOR,
    ("POST", "/ui/channels/{name}/test"): OPERATOR,
    # administrators: the owner's alone, reading included
    ("GET", "/accounts"): OWNER,
    ("POST", "/accounts"): OWNER,
    ("PATCH", "/accounts/{name}"): OWNER,
    ("DELETE", "/accounts/{name}"): OWNER,
    ("GET", "/ui/accounts"): OWNER,
    ("POST", "/ui/accounts"): OWNER,
    ("POST", "/ui/accounts/{name}"): OWNER,
    ("POST", "/ui/accounts/{name}/delete"): OWNER,
    # the session itself
    ("POST", "/logout"): VIEWER,
}
CONTENT_ROLE: Role = OPERATOR
"""The least role that may read a call's kept content, on the API and the dashboard."""
OPEN_ROUTES = frozenset({("GET", "/login"), ("POST", "/login")})
"""Reached before signing in."""


def needed(method: str, template: str) -> Role:
    """The least role that may call ``method template`` (the template under /admin)."""
    found = ROUTE_ROLES.get((method, template))
    if found is not None:
        return found
    return VIEWER if method in ("GET", "HEAD") else OWNER
