"""/admin JSON API: groups, keys, usage, the overview, channels, voices and the audit log,
with the operator's admin token as ``Authorization: Bearer <token>``.

Every handler goes through ``AdminService`` (the dashboard and the CLI use the same),
which audits each change and tells this instance's directory at once. The endpoints
are documented in ``docs/admin-api.md``.
"""

from __future__ import annotations

from aiohttp import web

from parley.admin import batch_admin
from parley.admin.channel_admin import ChannelAdmin
from parley.admin.context import admin_service
from parley.admin.fields import (
    MAX_LIMIT,
    check_sealable,
    content_logging,
    content_policy_field,
    optional_int,
    printable,
    retention_field,
)
from parley.admin.fields import budget_field as _budget
from parley.admin.fields import models_field as _models
from parley.admin.finding import (
    GROUPS,
    MAX_PAGE,
    audit_query_from_params,
    clone_finder,
    key_finder,
    listing_from_params,
)
from parley.admin.monitor import alerts_view, budget_watch, overview
from parley.admin.reports import query_from_params
from parley.admin.request_log import (
    export_csv,
    filters_from_params,
    find_line,
    line_view,
    read_page,
)
from parley.admin.views import audit_view, clone_view, deletion_view, group_view, key_view
from parley.api.body import read_json
from parley.api.reply import json_reply
from parley.credentials import SealError
from parley.domain.groups import Quota
from parley.domain.numbers import whole_number
from parley.errors import InvalidRequest, NotFound, ParleyError
from parley.pipeline.context import SERVICES
from parley.store.base import GroupChanges

MAX_AUDIT_PAGE = 500
MAX_IDEMPOTENCY_KEY = 64


def idempotency_key(request: web.Request) -> str | None:
    """The ``Idempotency-Key`` header: the same value twice creates one key."""
    value = request.headers.get("Idempotency-Key")
    if value is None:
        return None
    if not 1 <= len(value) <= MAX_IDEMPOTENCY_KEY or not value.isprintable():
        raise InvalidRequest(
            f"'Idempotency-Key' must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters.",
            param="Idempotency-Key",
        )
    return value


async def list_groups(request: web.Request) -> web.Response:
    """One page of groups: ``q`` searches names, ``sort`` by name, created or id."""
    listing = listing_from_params(request.query, GROUPS.sort_names(), default_limit=MAX_PAGE)
    found = GROUPS.find(await admin_service(request).groups(), listing)
    data = [group_view(g) for g in found.items]
    return json_reply({"object": "list", "data": data, **found.meta()})


async def get_group(request: web.Request) -> web.Response:
    service = admin_service(request)
    group = await service.group(request.match_info["name"])
    budget = await service.budget(group)
    return json_reply({**group_view(group), "budget": budget.view()})


async def create_group(request: web.Request) -> web.Response:
    body = await read_json(request)
    name = body.get("name")
    if not isinstance(name, str):
        raise InvalidRequest("'name' must be a string.", param="name")
    content = content_logging(body)
    _sealable(request, content.policy)
    group = await admin_service(request).create_group(
        name,
        quota=Quota(rpm=optional_int(body, "rpm"), tpm=optional_int(body, "tpm")),
        models=_models(body),
        budget_nanos=_budget(body),
        content=content,
    )
    return json_reply(group_view(group), status=201)


async def update_group(request: web.Request) -> web.Response:
    body = await read_json(request)
    changes = GroupChanges(
        rpm=optional_int(body, "rpm"),
        tpm=optional_int(body, "tpm"),
        models=_models(body),
        budget_nanos=_budget(body),
        clear_rpm="rpm" in body and body["rpm"] is None,
        clear_tpm="tpm" in body and body["tpm"] is None,
        clear_models="models" in body and body["models"] is None,
        clear_budget="budget_usd" in body and body["budget_usd"] is None,
        content_policy=content_policy_field(body),
        content_retention_days=retention_field(body),
    )
    _sealable(request, changes.content_policy)
    group = await admin_service(request).update_group(request.match_info["name"], changes)
    return json_reply(group_view(group))


def _sealable(request: web.Request, policy: str | None) -> None:
    check_sealable(policy, request.config_dict[SERVICES].contents.can_seal)


async def disable_group(request: web.Request) -> web.Response:
    group = await admin_service(request).set_disabled(request.match_info["name"], True)
    return json_reply(group_view(group))


async def enable_group(request: web.Request) -> web.Response:
    group = await admin_service(request).set_disabled(request.match_info["name"], False)
    return json_reply(group_view(group))


async def list_keys(request: web.Request) -> web.Response:
    """One page of keys (of one ``group``, or every group's): ``q`` searches labels,
    prefixes and group names; ``status`` keeps one status."""
    service = admin_service(request)
    states = await service.keys(request.query.get("group") or None)
    names = {group.id: group.name for group in await service.groups()}
    status = request.query.get("status", "")
    if status:
        states = [state for state in states if state.status == status]
    finder = key_finder(names)
    found = finder.find(
        states, listing_from_params(request.query, finder.sort_names(), default_limit=MAX_PAGE)
    )
    data = [key_view(s, names) for s in found.items]
    return json_reply({"object": "list", "data": data, **found.meta()})


async def create_key(request: web.Request) -> web.Response:
    service = admin_service(request)
    body = await read_json(request)
    group, name = body.get("group"), printable(body.get("name") or "", "name")
    if not isinstance(group, str):
        raise InvalidRequest("'group' must name an existing group.", param="group")
    state, secret = await service.create_key(
        group,
        name=name,
        expires_in_days=optional_int(body, "expires_in_days"),
        quota=Quota(rpm=optional_int(body, "rpm"), tpm=optional_int(body, "tpm")),
        models=_models(body),
        budget_nanos=_budget(body),
        idempotency_key=idempotency_key(request),
    )
    names = {state.record.group_id: group}
    return json_reply({**key_view(state, names), "key": secret}, status=201)


async def revoke_key(request: web.Request) -> web.Response:
    service = admin_service(request)
    raw = request.match_info["key_id"]
    number = whole_number(raw, 1, MAX_LIMIT)
    if number is None:
        raise NotFound(f"No key with id '{raw}'.", param="key_id")
    state = await service.revoke_key(number)
    names = {group.id: group.name for group in await service.groups()}
    return json_reply(key_view(state, names))


async def usage(request: web.Request) -> web.StreamResponse:
    report = await admin_service(request).usage(query_from_params(request.query))
    output = request.query.get("format", "json")
    if output == "csv":
        name = f"parley-usage-{report.query.since}-{report.query.until}.csv"
        return web.Response(
            text=report.csv(),
            content_type="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )
    if output != "json":
        raise InvalidRequest("'format' must be json or csv.", param="format")
    return json_reply(report.view())


async def list_requests(request: web.Request) -> web.StreamResponse:
    """The request log: one page of JSON (``cursor`` for the next), or every line as CSV."""
    service = admin_service(request)
    filters = filters_from_params(request.query)
    output = request.query.get("format", "json")
    if output == "csv":
        return web.Response(
            text=await export_csv(service, filters),
            content_type="text/csv",
            headers={"Content-Disposition": 'attachment; filename="parley-requests.csv"'},
        )
    if output != "json":
        raise InvalidRequest("'format' must be json or csv.", param="format")
    page = await read_page(service, filters, request.query.get("cursor") or None)
    return json_reply(page.view())


async def get_request(request: web.Request) -> web.Response:
    line = await find_line(admin_service(request), request.match_info["request_id"])
    return json_reply(line_view(line))


async def get_request_content(request: web.Request) -> web.Response:
    """A call's kept content (its group's content policy), opened; every view audited."""
    request_id = request.match_info["request_id"]
    contents = request.config_dict[SERVICES].contents
    try:
        document = await admin_service(request).call_content(request_id, contents.opened)
    except SealError as error:
        raise ParleyError(str(error)) from None
    if document is None:
        raise NotFound(
            f"No content is kept for request '{request_id}': its group's content policy "
            "was off, it expired, or it was not written.",
            param="request_id",
        )
    return json_reply({"object": "request.content", "request_id": request_id, **document})


async def list_voices(request: web.Request) -> web.Response:
    """One page of cloned voices: ``q`` searches ids, labels, models and group names."""
    service = admin_service(request)
    clones = await service.clones(request.query.get("group"), request.query.get("model"))
    names = {group.id: group.name for group in await service.groups()}
    finder = clone_finder(names)
    listing = listing_from_params(request.query, finder.sort_names(), default_limit=MAX_PAGE)
    found = finder.find(clones, listing)
    data = [clone_view(c, names) for c in found.items]
    return json_reply({"object": "list", "data": data, **found.meta()})


async def delete_voice(request: web.Request) -> web.Response:
    service = admin_service(request)
    deleted = await service.delete_clone(
        request.match_info["model"], request.match_info["voice_id"]
    )
    names = {group.id: group.name for group in await service.groups()}
    pending = deleted.pending
    return json_reply(
        {
            **clone_view(deleted.clone, names),
            "deleted": True,
            "pending_deletion": deletion_view(pending, names) if pending is not None else None,
        }
    )


async def list_batches(request: web.Request) -> web.Response:
    """The newest batches (``group``, ``status``), with progress and cost so far."""
    service = admin_service(request)
    found = await batch_admin.batches(
        request,
        service,
        request.query.get("group", "").strip(),
        batch_admin.status_filter(request.query),
    )
    return json_reply({"object": "list", "data": [state.view() for state in found]})


async def get_batch(request: web.Request) -> web.Response:
    state = await batch_admin.find_batch(
        request, admin_service(request), request.match_info["batch_id"]
    )
    return json_reply(state.view())


async def cancel_batch(request: web.Request) -> web.Response:
    state = await batch_admin.cancel(
        request, admin_service(request), request.match_info["batch_id"]
    )
    return json_reply(state.view())


async def list_files(request: web.Request) -> web.Response:
    """The newest files (``group``): metadata only."""
    found = await batch_admin.files(
        request, admin_service(request), request.query.get("group", "").strip()
    )
    return json_reply({"object": "list", "data": found})


async def get_overview(request: web.Request) -> web.Response:
    svc = request.config_dict[SERVICES]
    watch = await budget_watch(admin_service(request))
    return json_reply(
        {
            **(await overview(svc.store)).view(),
            "spend": watch.view(),
            "alerts": alerts_view(svc.alerts),
        }
    )


async def list_channels(request: web.Request) -> web.Response:
    """The config file's channels and those managed live (``channels.py``)."""
    views = ChannelAdmin(admin_service(request), request.config_dict[SERVICES]).views()
    return json_reply({"object": "list", "data": views})


async def audit(request: web.Request) -> web.Response:
    """The newest entries first, filtered by actor, action, target and time; ``before``
    (the ``next_before`` of the last page) pages back."""
    limit = min(_query_int(request, "limit", 100) or 100, MAX_AUDIT_PAGE)
    before = _query_int(request, "before", None)
    query = audit_query_from_params(request.query)
    entries = await admin_service(request).audit_log(limit=limit, before_id=before, query=query)
    next_before = entries[-1].id if len(entries) == limit else None
    data = [audit_view(e) for e in entries]
    return json_reply({"object": "list", "data": data, "next_before": next_before})


def _query_int(request: web.Request, name: str, default: int | None) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    number = whole_number(raw, 1, MAX_LIMIT)
    if number is None:
        raise InvalidRequest(f"'{name}' must be a positive integer.", param=name)
    return number
