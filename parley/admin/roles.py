"""Who may do what on /admin: the one table of route → least role, for the JSON API and
the dashboard alike (``site.gate`` checks it before any handler runs).

A route is named by its method and its path template under ``/admin``. Reads (``GET``)
need ``viewer`` unless listed; any other method not listed needs ``owner``, so a new
route is closed until it is given its place here. A call's kept content (prompts and
replies, ``CONTENT_ROLE``) is an operator's or the owner's to read, never a viewer's;
the dashboard's request page shows it by the same rule.

A ``group-admin`` (one group's own administrator) is not on that ladder: it may call
only the routes ``GROUP_ADMIN_ROUTES`` gives a scope, and each of those only on its own
group's things (``tenancy.py`` checks the thing the path names, in one place). Every
served route has its decision there, refusals included (``None``), so a new route is
refused to group-admins until someone decides, and a test fails until they do.
"""

from __future__ import annotations

from typing import Literal

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
    ("POST", "/voice-deletions/{deletion_id}/retry"): OPERATOR,
    ("DELETE", "/voice-deletions/{deletion_id}"): OPERATOR,
    ("POST", "/ui/groups"): OPERATOR,
    ("POST", "/ui/groups/{name}"): OPERATOR,
    ("POST", "/ui/groups/{name}/disable"): OPERATOR,
    ("POST", "/ui/groups/{name}/enable"): OPERATOR,
    ("POST", "/ui/groups/{name}/content"): OPERATOR,
    ("POST", "/ui/groups/{name}/keys"): OPERATOR,
    ("POST", "/ui/keys"): OPERATOR,
    ("POST", "/ui/keys/{key_id}/revoke"): OPERATOR,
    ("POST", "/ui/keys/{key_id}"): OPERATOR,
    ("POST", "/ui/keys/{key_id}/rotate"): OPERATOR,
    ("POST", "/ui/voices/{model}/{voice_id}/delete"): OPERATOR,
    ("POST", "/ui/voice-deletions/{deletion_id}/retry"): OPERATOR,
    ("POST", "/ui/voice-deletions/{deletion_id}/abandon"): OPERATOR,
    # calls' kept content: prompts and replies are not a viewer's to read
    ("GET", "/requests/{request_id}/content"): OPERATOR,
    ("POST", "/batches/{batch_id}/cancel"): OPERATOR,
    ("POST", "/ui/batches/{batch_id}/cancel"): OPERATOR,
    # talking to a realtime model: a session billed to the key chosen
    ("GET", "/ui/realtime/talk"): OPERATOR,
    ("POST", "/ui/realtime/talk"): OPERATOR,
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
    # models and prices
    ("POST", "/models"): OPERATOR,
    ("PATCH", "/models/{name}"): OPERATOR,
    ("DELETE", "/models/{name}"): OPERATOR,
    ("POST", "/ui/models"): OPERATOR,
    ("POST", "/ui/models/{name}"): OPERATOR,
    ("POST", "/ui/models/{name}/delete"): OPERATOR,
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
OPEN_ROUTES = frozenset(
    {("GET", "/login"), ("POST", "/login"), ("GET", "/sso/start"), ("GET", "/sso/callback")}
)
"""Reached before signing in."""


Scope = Literal["home", "own", "group", "key", "request"]
HOME: Scope = "home"
"""The dashboard's landing and group list: a group-admin is sent to its group's page."""
OWN: Scope = "own"
"""A list, report or form whose data the group-admin's service narrows to its group
(a group named in its query or body other than theirs is not found)."""
GROUP: Scope = "group"
"""The path's ``{name}`` is a group: theirs, or 404."""
KEY: Scope = "key"
"""The path's ``{key_id}`` is a key: of their group, or 404."""
REQUEST: Scope = "request"
"""The path's ``{request_id}`` is a line of the request log: of their group, or 404."""
REFUSED = None
"""Not a group-admin's: 403, whatever the path names (so it confirms nothing)."""

GROUP_ADMIN_ROUTES: dict[tuple[str, str], Scope | None] = {
    # their group: read, not changed (limits, budget and enabling are the operator's)
    ("GET", "/groups"): OWN,
    ("GET", "/groups/{name}"): GROUP,
    ("POST", "/groups"): REFUSED,
    ("PATCH", "/groups/{name}"): REFUSED,
    ("POST", "/groups/{name}/disable"): REFUSED,
    ("POST", "/groups/{name}/enable"): REFUSED,
    ("GET", "/"): HOME,
    ("GET", "/ui/groups"): HOME,
    ("POST", "/ui/groups"): REFUSED,
    ("GET", "/ui/groups/{name}"): GROUP,
    ("POST", "/ui/groups/{name}"): REFUSED,
    ("POST", "/ui/groups/{name}/disable"): REFUSED,
    ("POST", "/ui/groups/{name}/enable"): REFUSED,
    # their keys: listed, created, changed, rotated and revoked within the group's limits
    ("GET", "/keys"): OWN,
    ("POST", "/keys"): OWN,
    ("GET", "/keys/{key_id}"): KEY,
    ("PATCH", "/keys/{key_id}"): KEY,
    ("DELETE", "/keys/{key_id}"): KEY,
    ("POST", "/keys/{key_id}/rotate"): KEY,
    ("POST", "/ui/groups/{name}/keys"): GROUP,
    ("GET", "/ui/keys"): OWN,
    ("POST", "/ui/keys"): OWN,
    ("GET", "/ui/keys/{key_id}"): KEY,
    ("POST", "/ui/keys/{key_id}"): KEY,
    ("POST", "/ui/keys/{key_id}/rotate"): KEY,
    ("POST", "/ui/keys/{key_id}/revoke"): KEY,
    # their usage, spend and request log
    ("GET", "/usage"): OWN,
    ("GET", "/requests"): OWN,
    ("GET", "/requests/{request_id}"): REQUEST,
    ("GET", "/ui/usage"): OWN,
    ("GET", "/ui/usage.csv"): OWN,
    ("GET", "/ui/requests"): OWN,
    ("GET", "/ui/requests.csv"): OWN,
    ("GET", "/ui/requests/{request_id}"): REQUEST,
    # their batches and files: seen (another group's batch is not found), not cancelled
    # here (the group's own keys cancel through /v1/batches)
    ("GET", "/batches"): OWN,
    ("GET", "/batches/{batch_id}"): OWN,
    ("GET", "/files"): OWN,
    ("GET", "/ui/batches"): OWN,
    ("POST", "/batches/{batch_id}/cancel"): REFUSED,
    ("POST", "/ui/batches/{batch_id}/cancel"): REFUSED,
    # their realtime sessions open now, and talking to a model with one of their keys
    ("GET", "/ui/realtime"): OWN,
    ("GET", "/ui/realtime/talk"): OWN,
    ("POST", "/ui/realtime/talk"): OWN,
    # the session
    ("POST", "/logout"): OWN,
    # everyone's, or the gateway's: never a group-admin's
    ("GET", "/overview"): REFUSED,
    ("GET", "/audit"): REFUSED,
    ("GET", "/ui/audit"): REFUSED,
    ("GET", "/voices"): REFUSED,
    ("GET", "/voices/roster"): REFUSED,
    ("DELETE", "/voices/{model}/{voice_id}"): REFUSED,
    ("GET", "/ui/voices"): REFUSED,
    ("POST", "/ui/voices/{model}/{voice_id}/delete"): REFUSED,
    ("GET", "/models"): REFUSED,
    ("POST", "/models"): REFUSED,
    ("GET", "/models/{name}"): REFUSED,
    ("PATCH", "/models/{name}"): REFUSED,
    ("DELETE", "/models/{name}"): REFUSED,
    ("GET", "/ui/models"): REFUSED,
    ("POST", "/ui/models"): REFUSED,
    ("GET", "/ui/models/{name}"): REFUSED,
    ("POST", "/ui/models/{name}"): REFUSED,
    ("POST", "/ui/models/{name}/delete"): REFUSED,
    ("GET", "/requests/{request_id}/content"): REFUSED,
    ("POST", "/ui/groups/{name}/content"): REFUSED,
    ("GET", "/voice-deletions"): REFUSED,
    ("POST", "/voice-deletions/{deletion_id}/retry"): REFUSED,
    ("DELETE", "/voice-deletions/{deletion_id}"): REFUSED,
    ("POST", "/ui/voice-deletions/{deletion_id}/retry"): REFUSED,
    ("POST", "/ui/voice-deletions/{deletion_id}/abandon"): REFUSED,
    ("GET", "/channels"): REFUSED,
    ("POST", "/channels"): REFUSED,
    ("POST", "/channels/reseal"): REFUSED,
    ("GET", "/channels/{name}"): REFUSED,
    ("PATCH", "/channels/{name}"): REFUSED,
    ("DELETE", "/channels/{name}"): REFUSED,
    ("POST", "/channels/{name}/disable"): REFUSED,
    ("POST", "/channels/{name}/enable"): REFUSED,
    ("POST", "/channels/{name}/test"): REFUSED,
    ("GET", "/channels/{name}/history"): REFUSED,
    ("GET", "/ui/channels"): REFUSED,
    ("POST", "/ui/channels"): REFUSED,
    ("GET", "/ui/channels/{name}"): REFUSED,
    ("POST", "/ui/channels/{name}"): REFUSED,
    ("POST", "/ui/channels/{name}/disable"): REFUSED,
    ("POST", "/ui/channels/{name}/enable"): REFUSED,
    ("POST", "/ui/channels/{name}/delete"): REFUSED,
    ("POST", "/ui/channels/{name}/test"): REFUSED,
    ("GET", "/accounts"): REFUSED,
    ("POST", "/accounts"): REFUSED,
    ("PATCH", "/accounts/{name}"): REFUSED,
    ("DELETE", "/accounts/{name}"): REFUSED,
    ("GET", "/ui/accounts"): REFUSED,
    ("POST", "/ui/accounts"): REFUSED,
    ("POST", "/ui/accounts/{name}"): REFUSED,
    ("POST", "/ui/accounts/{name}/delete"): REFUSED,
}
"""Every route under /admin but the sign-in page, and what a group-admin may do on it.
A route missing here is refused (403), like one marked ``REFUSED``."""


GROUP_ADMIN_REFUSAL = (
    "Your role (group-admin) may not do this: a group administrator sees and changes only "
    "its own group's keys, usage and request log."
)


def group_admin_scope(method: str, template: str) -> Scope | None:
    """What a group-admin may reach through ``method template``: None when refused."""
    return GROUP_ADMIN_ROUTES.get((method, template))


def needed(method: str, template: str) -> Role:
    """The least role that may call ``method template`` (the template under /admin)."""
    found = ROUTE_ROLES.get((method, template))
    if found is not None:
        return found
    return VIEWER if method in ("GET", "HEAD") else OWNER
