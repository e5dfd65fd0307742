"""Search, sort and offset pagination for the admin lists (groups, keys, voices), shared
by the admin API and the dashboard.

These lists are small enough to be read whole (the directory holds every group and key
in memory anyway); a ``Finder`` filters them by a case-insensitive text search, sorts
them by one named field and cuts one page. The audit log, which grows without bound, is
searched in the database instead (``AuditQuery``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from multidict import MultiMapping

from parley.admin.views import KeyState
from parley.domain.audit import AuditQuery
from parley.domain.groups import Group
from parley.domain.numbers import whole_number
from parley.domain.voices import Clone
from parley.errors import InvalidRequest

T = TypeVar("T")
DEFAULT_PAGE = 50
MAX_PAGE = 500
MAX_OFFSET = 10_000_000
MAX_SEARCH = 200


@dataclass(frozen=True, slots=True)
class Listing:
    """What one list request asks for: a search, a sort field and order, a page."""

    q: str = ""
    sort: str = ""
    descending: bool = False
    limit: int = DEFAULT_PAGE
    offset: int = 0


def _number(params: MultiMapping[str], name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name, "")
    if raw == "":
        return default
    number = whole_number(raw, low, high)
    if number is None:
        raise InvalidRequest(f"'{name}' must be a whole number from {low} to {high}.", param=name)
    return number


def search_text(params: MultiMapping[str], name: str = "q") -> str:
    raw = params.get(name, "").strip()
    if len(raw) > MAX_SEARCH or not raw.isprintable():
        raise InvalidRequest(
            f"'{name}' must be at most {MAX_SEARCH} printable characters.", param=name
        )
    return raw


def listing_from_params(
    params: MultiMapping[str], sorts: Sequence[str], *, default_limit: int = DEFAULT_PAGE
) -> Listing:
    """Check ``q``, ``sort`` (a field, ``-field`` for descending), ``limit`` and ``offset``."""
    raw_sort = params.get("sort", "")
    descending = raw_sort.startswith("-")
    field = raw_sort.removeprefix("-")
    if field and field not in sorts:
        raise InvalidRequest(
            f"'sort' must be one of {', '.join(sorts)} (with '-' before it for descending).",
            param="sort",
        )
    order = params.get("order", "")
    if order not in ("", "asc", "desc"):
        raise InvalidRequest("'order' must be asc or desc.", param="order")
    return Listing(
        q=search_text(params),
        sort=field or sorts[0],
        descending=descending or order == "desc",
        limit=_number(params, "limit", default_limit, 1, MAX_PAGE),
        offset=_number(params, "offset", 0, 0, MAX_OFFSET),
    )


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    total: int
    """How many matched the search, over every page."""
    listing: Listing

    @property
    def next_offset(self) -> int | None:
        after = self.listing.offset + len(self.items)
        return after if after < self.total else None

    @property
    def previous_offset(self) -> int | None:
        if self.listing.offset == 0:
            return None
        return max(0, self.listing.offset - self.listing.limit)

    def meta(self) -> dict[str, Any]:
        """The page's place in the list, as the admin API reports it."""
        return {
            "total": self.total,
            "offset": self.listing.offset,
            "limit": self.listing.limit,
            "next_offset": self.next_offset,
            "has_more": self.next_offset is not None,
        }


def _key(value: Any) -> tuple[int, Any]:
    """Sort ``None`` last, strings without case, everything else as it is."""
    if value is None:
        return (1, "")
    if isinstance(value, str):
        return (0, value.casefold())
    if isinstance(value, datetime):
        return (0, value.astimezone(UTC))
    return (0, value)


class Finder(Generic[T]):
    """How one kind of item is searched (the texts it is found by) and sorted."""

    def __init__(
        self,
        texts: Callable[[T], Sequence[str]],
        sorts: Mapping[str, Callable[[T], Any]],
    ) -> None:
        self._texts = texts
        self.sorts = sorts

    def sort_names(self) -> list[str]:
        return list(self.sorts)

    def find(self, items: Sequence[T], listing: Listing) -> Page[T]:
        wanted = listing.q.casefold()
        found = [
            item
            for item in items
            if not wanted or any(wanted in text.casefold() for text in self._texts(item))
        ]
        field = self.sorts[listing.sort]
        missing = [item for item in found if field(item) is None]
        present = [item for item in found if field(item) is not None]
        present.sort(key=lambda item: _key(field(item)), reverse=listing.descending)
        ordered = present + missing  # no value: last, whichever the order
        end = listing.offset + listing.limit
        return Page(ordered[listing.offset : end], len(found), listing)


GROUPS: Finder[Group] = Finder(
    lambda group: (group.name,),
    {
        "id": lambda group: group.id,
        "name": lambda group: group.name,
        "created": lambda group: group.created_at,
    },
)


def key_finder(group_names: Mapping[int, str]) -> Finder[KeyState]:
    """Keys found by label, prefix (the current secret's or one a rotation replaced: an
    old request-log line's prefix finds its key) or group name; newest first unless
    sorted otherwise."""
    return Finder(
        lambda state: (
            state.record.name,
            state.record.prefix,
            *state.record.former_prefixes,
            group_names.get(state.record.group_id, ""),
        ),
        {
            "created": lambda state: state.record.id,
            "name": lambda state: state.record.name,
            "group": lambda state: group_names.get(state.record.group_id, ""),
            "status": lambda state: state.status,
            "last_used": lambda state: state.last_used_at,
            "expires": lambda state: state.record.expires_at,
        },
    )


def clone_finder(group_names: Mapping[int, str]) -> Finder[Clone]:
    return Finder(
        lambda clone: (
            clone.voice_id,
            clone.label,
            clone.model,
            group_names.get(clone.group_id, ""),
        ),
        {
            "created": lambda clone: clone.created_at,
            "voice_id": lambda clone: clone.voice_id,
            "model": lambda clone: clone.model,
            "group": lambda clone: group_names.get(clone.group_id, ""),
        },
    )


def _time(params: MultiMapping[str], name: str) -> datetime | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        if len(raw) > 40:
            raise ValueError(raw)
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(
            f"'{name}' must be a date or an ISO 8601 time, e.g. 2026-11-25 or "
            "2026-11-25T14:00:00Z.",
            param=name,
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def audit_query_from_params(params: MultiMapping[str]) -> AuditQuery:
    """``actor``, ``action`` (exact, or a prefix ending in '.', e.g. ``key.``),
    ``target`` (a part of it), ``since`` and ``until`` (ISO times; a bare date is its
    midnight UTC, and ``until`` is excluded)."""
    return AuditQuery(
        actor=search_text(params, "actor"),
        action=search_text(params, "action"),
        target=search_text(params, "target"),
        since=_time(params, "since"),
        until=_time(params, "until"),
    )
