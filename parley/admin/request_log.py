"""The request log as the operator reads it: filters from a query string, one page of
lines (JSON, CSV, the dashboard's table) and a cursor to the next.

Shared by ``GET /admin/requests`` and the dashboard's Requests page. The lines are the
store's usage records, refusals included (``domain/requests.py``); none holds a prompt,
a reply or a key (only its label and prefix).
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from multidict import MultiMapping

from parley.admin.service import AdminService
from parley.domain.batches import (
    LINE_PREFIX,
    batch_of,
    is_batch_id,
    is_message_batch_id,
    lines_prefix,
)
from parley.domain.numbers import whole_number
from parley.domain.pricing import nanos_to_usd, unit_prices
from parley.domain.realtime_sessions import is_session_id, session_of
from parley.domain.realtime_sessions import lines_prefix as session_lines
from parley.domain.requests import LoggedRequest, RequestQuery, StatusFilter
from parley.errors import InvalidRequest, NotFound

DEFAULT_PAGE = 50
MAX_PAGE = 500
MAX_CSV_LINES = 10_000
"""An export's most lines (pages of ``MAX_PAGE``); narrow the filters for more."""
MAX_TEXT = 200
MAX_ID = 2_147_483_647
MIN_PREFIX = 4
"""The fewest characters of a prefix the ``key`` filter takes (``pk-`` alone is every key)."""
STATUS_CLASSES = ("2xx", "3xx", "4xx", "5xx")
COLUMNS = (
    "created_at",
    "request_id",
    "group",
    "key_name",
    "key_prefix",
    "endpoint",
    "dialect",
    "model_requested",
    "model",
    "channel",
    "status",
    "error_code",
    "error_detail",
    "admitted",
    "requests",
    "latency_ms",
    "first_byte_ms",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "total_tokens",
    "characters",
    "audio_seconds",
    "search_units",
    "cost_usd",
    "estimated",
    "batch_id",
    "session_id",
)


@dataclass(frozen=True, slots=True)
class Filters:
    """The query as the operator wrote it (names, not ids), to show and link back."""

    group: str = ""
    key: str = ""
    model: str = ""
    status: str = ""
    since: str = ""
    until: str = ""
    batch: str = ""
    """``true``: batch lines alone; a batch's id: its lines alone."""
    session: str = ""
    """A realtime session's id: its lines alone (its turns and input transcriptions)."""
    limit: int = DEFAULT_PAGE

    def params(self, cursor: str | None = None) -> dict[str, str]:
        """The non-empty filters as query parameters (with ``cursor``, the next page's)."""
        params = {
            "group": self.group,
            "key": self.key,
            "model": self.model,
            "status": self.status,
            "since": self.since,
            "until": self.until,
            "batch": self.batch,
            "session": self.session,
        }
        if self.limit != DEFAULT_PAGE:
            params["limit"] = str(self.limit)
        if cursor:
            params["cursor"] = cursor
        return {name: value for name, value in params.items() if value}


@dataclass(frozen=True, slots=True)
class Page:
    filters: Filters
    lines: list[LoggedRequest]
    next_cursor: str | None

    def view(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [line_view(line) for line in self.lines],
            "has_more": self.next_cursor is not None,
            "next_cursor": self.next_cursor,
        }


def filters_from_params(params: MultiMapping[str]) -> Filters:
    """The filters of a query string, checked for form (names are looked up later)."""
    values = {name: params.get(name, "").strip() for name in ("group", "key", "model", "status")}
    for name, value in values.items():
        if len(value) > MAX_TEXT or not value.isprintable():
            raise InvalidRequest(f"'{name}' is not a name Parley knows.", param=name)
    raw_limit = params.get("limit", "")
    if raw_limit and whole_number(raw_limit, 1, MAX_PAGE) is None:
        raise InvalidRequest(f"'limit' must be from 1 to {MAX_PAGE}.", param="limit")
    filters = Filters(
        **values,
        since=params.get("since", "").strip(),
        until=params.get("until", "").strip(),
        batch=params.get("batch", "").strip(),
        session=params.get("session", "").strip(),
        limit=int(raw_limit) if raw_limit else DEFAULT_PAGE,
    )
    _status(filters.status)
    _line_prefix(filters)
    _instant(filters.since, "since", end=False)
    _instant(filters.until, "until", end=True)
    return filters


async def read_page(service: AdminService, filters: Filters, cursor: str | None) -> Page:
    """One page of lines, newest first, after ``cursor`` (from the previous page)."""
    query = await _query(service, filters)
    query = replace(query, after=decode_cursor(cursor) if cursor else None)
    lines = await service.store.list_requests(replace(query, limit=filters.limit + 1))
    more = len(lines) > filters.limit
    lines = lines[: filters.limit]
    return Page(filters, lines, encode_cursor(lines[-1]) if more else None)


async def export_csv(service: AdminService, filters: Filters) -> str:
    """Every line the filters match (at most ``MAX_CSV_LINES``), newest first, as CSV."""
    query = replace(await _query(service, filters), limit=MAX_PAGE)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    written = 0
    while written < MAX_CSV_LINES:
        lines = await service.store.list_requests(query)
        for line in lines[: MAX_CSV_LINES - written]:
            view = line_view(line)
            writer.writerow([_cell(view, column) for column in COLUMNS])
        written += len(lines)
        if len(lines) < MAX_PAGE:
            break
        last = lines[-1].record
        query = replace(query, after=(last.created_at, last.request_id))
    return out.getvalue()


async def find_line(service: AdminService, request_id: str) -> LoggedRequest:
    found = None
    if len(request_id) <= MAX_TEXT and request_id.isprintable():
        found = await service.store.find_request(request_id)
    if found is not None and service.scope is not None:  # another group's is not there
        found = found if found.record.group_id == service.scope.id else None
    if found is None:
        raise NotFound(f"No request '{request_id}' in the log.", param="request_id")
    return found


def line_view(line: LoggedRequest) -> dict[str, Any]:
    record = line.record
    return {
        "object": "request",
        "request_id": record.request_id,
        "batch_id": batch_of(record.request_id),
        "session_id": session_of(record.request_id),
        "created_at": record.created_at.isoformat(),
        "group_id": record.group_id,
        "group": line.group,
        "key": {"id": record.key_id, "name": line.key_name, "prefix": line.key_prefix},
        "endpoint": record.endpoint,
        "dialect": line.dialect,
        "model_requested": record.model_requested or None,
        "model": record.model or None,
        "channel": record.channel or None,
        "status": record.status,
        "error_code": record.error_code,
        "error_detail": record.error_detail,
        "admitted": record.admitted,
        "requests": record.request_count,
        "latency_ms": record.latency_ms,
        "first_byte_ms": record.first_byte_ms,
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "cached_tokens": record.cached_tokens,
        "cache_write_tokens": record.cache_write_tokens,
        "total_tokens": record.prompt_tokens + record.completion_tokens,
        "characters": record.characters,
        "audio_seconds": record.audio_ms / 1000,
        "search_units": record.search_units,
        "cost_usd": nanos_to_usd(record.cost_nanos),
        "estimated": record.estimated,
        "price": unit_prices(record.price),
    }


def _cell(view: dict[str, Any], column: str) -> object:
    if column in ("key_name", "key_prefix"):
        value = view["key"][column.removeprefix("key_")]
    else:
        value = view[column]
    return "" if value is None else value


async def _query(service: AdminService, filters: Filters) -> RequestQuery:
    group_id = (await service.group(filters.group)).id if filters.group else None
    if group_id is None and service.scope is not None:  # a group-admin's: theirs alone
        group_id = service.scope.id
    key_id = await _key_id(service, filters.key) if filters.key else None
    return RequestQuery(
        since=_instant(filters.since, "since", end=False),
        until=_instant(filters.until, "until", end=True),
        group_id=group_id,
        key_id=key_id,
        model=filters.model or None,
        status=_status(filters.status),
        request_prefix=_line_prefix(filters),
    )


def _line_prefix(filters: Filters) -> str | None:
    """The request ids the ``batch`` or ``session`` filter keeps (one of them at most: a
    line is never both a batch's and a session's)."""
    if not filters.session:
        return _batch_prefix(filters.batch)
    if filters.batch:
        raise InvalidRequest("Give 'batch' or 'session', not both.", param="session")
    if not is_session_id(filters.session):
        raise InvalidRequest("'session' must be a realtime session's id.", param="session")
    return session_lines(filters.session)


def _batch_prefix(raw: str) -> str | None:
    """The request ids ``batch`` keeps: every batch line's (``true``) or one batch's."""
    if not raw:
        return None
    if raw == "true":
        return LINE_PREFIX
    if is_batch_id(raw) or is_message_batch_id(raw):
        return lines_prefix(raw)
    raise InvalidRequest("'batch' must be 'true' or a batch's id.", param="batch")


async def _key_id(service: AdminService, wanted: str) -> int:
    """The key a filter names: by its id, or by a prefix (or its start) of its secret now
    or of one a rotation replaced, so an old line's prefix finds its key."""
    if wanted.isdecimal():
        if not 1 <= int(wanted) <= MAX_ID:
            raise InvalidRequest("'key' must be a key's id or prefix.", param="key")
        return int(wanted)
    if len(wanted) < MIN_PREFIX:
        raise InvalidRequest(
            f"'key' must be a key's id, or at least {MIN_PREFIX} characters of its prefix.",
            param="key",
        )
    found = [r for r in await service.store.list_keys() if r.known_by(wanted)]
    if not found:
        raise NotFound(f"No key has had a secret starting '{wanted}'.", param="key")
    if len(found) > 1:
        raise InvalidRequest(
            f"{len(found)} keys have had a secret starting '{wanted}'; give more of it.",
            param="key",
        )
    return found[0].id


def _status(raw: str) -> StatusFilter | None:
    if not raw:
        return None
    if raw.lower() in STATUS_CLASSES:
        low = int(raw[0]) * 100
        return StatusFilter(low, low + 99)
    if len(raw) == 3 and raw.isdecimal() and 100 <= int(raw) <= 599:
        return StatusFilter(int(raw), int(raw))
    raise InvalidRequest(
        "'status' must be a class (2xx, 3xx, 4xx, 5xx) or a code such as 429.", param="status"
    )


def _instant(raw: str, name: str, *, end: bool) -> datetime | None:
    """A date (the whole UTC day: ``until`` includes it) or an ISO 8601 time (UTC unless
    it names its zone)."""
    if not raw:
        return None
    try:
        if len(raw) == 10:
            day = datetime.combine(date.fromisoformat(raw), time(), UTC)
            return day + timedelta(days=1) if end else day
        at = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except (ValueError, OverflowError):
        raise InvalidRequest(
            f"'{name}' must be a date (YYYY-MM-DD) or an ISO 8601 time; got '{raw[:40]}'.",
            param=name,
        ) from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def encode_cursor(line: LoggedRequest) -> str:
    text = f"{line.record.created_at.isoformat()}|{line.record.request_id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, _, request_id = text.partition("|")
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None or not request_id.isprintable() or not request_id:
            raise ValueError(cursor)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest(
            "'cursor' is not one this endpoint gave; start again without it.", param="cursor"
        ) from None
    return moment.astimezone(UTC), request_id
