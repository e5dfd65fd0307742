"""A group-admin's gate: the one place where the thing a path names is checked to be of
their group, before any handler runs (``site.gate`` and the dashboard's gate call
``admit`` before ``signin.require_role``, which refuses group-admins the same routes).

* ``admit`` refuses the routes ``roles.GROUP_ADMIN_ROUTES`` gives no scope (403: the
  route is not theirs, whatever it names), once their group is known, so the refusal's
  page shows their navigation.
* It reads the account's group from the store on every request (an account
  moved to another group, or made an operator, takes effect at once), attaches it to
  the request (``GROUP_SCOPE``: ``context.admin_service`` then narrows every view to it)
  and checks the path's group, key or request-log line: another group's is a 404 with
  the words a missing one gets, so a group-admin cannot learn what exists elsewhere.
* ``home`` routes (the dashboard's landing and group list) send them to their group's
  page.
"""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from parley.admin.context import ACTOR, GROUP_SCOPE, ROLE, admin_service
from parley.admin.request_log import find_line
from parley.admin.roles import (
    GROUP,
    GROUP_ADMIN_REFUSAL,
    HOME,
    KEY,
    OPEN_ROUTES,
    REQUEST,
    group_admin_scope,
)
from parley.admin.signin import route_template
from parley.domain.accounts import GROUP_ADMIN
from parley.domain.groups import Group
from parley.domain.numbers import whole_number
from parley.errors import NotFound, PermissionDenied
from parley.pipeline.context import SERVICES

NO_GROUP = "This group administrator's account has no group: an owner must give it one."
MAX_KEY_ID = 2_147_483_647


def home(group: Group) -> str:
    """A group-admin's landing page: their group's."""
    return f"/admin/ui/groups/{quote(group.name, safe='')}"


async def their_group(request: web.Request) -> Group | None:
    """The group the signed-in group-admin administers, read now from the store."""
    store = request.config_dict[SERVICES].store
    account = await store.get_account(request[ACTOR].who)
    if account is None or account.role != GROUP_ADMIN or account.group_id is None:
        return None
    return next((g for g in await store.list_groups() if g.id == account.group_id), None)


async def admit(request: web.Request) -> None:
    """For a group-admin: attach their group and check the thing the path names (404 if
    it is another group's); anyone else passes untouched."""
    if request.get(ROLE) != GROUP_ADMIN:
        return
    template = route_template(request)
    if template is None or template.startswith("/static"):
        return
    if (request.method, template) in OPEN_ROUTES:
        return
    group = await their_group(request)
    if group is None:
        raise PermissionDenied(NO_GROUP, code="insufficient_role")
    request[GROUP_SCOPE] = group
    scope = group_admin_scope(request.method, template)
    if scope is None:
        raise PermissionDenied(GROUP_ADMIN_REFUSAL, code="insufficient_role")
    service = admin_service(request)
    if scope == HOME:
        raise web.HTTPSeeOther(home(group))
    if scope == GROUP:
        await service.group(request.match_info["name"])
    elif scope == KEY:
        raw = request.match_info["key_id"]
        number = whole_number(raw, 1, MAX_KEY_ID)
        if number is None:
            raise NotFound(f"No key with id '{raw}'.", param="key_id")
        await service.find_key(number)
    elif scope == REQUEST:
        await find_line(service, request.match_info["request_id"])
