"""The request log: one line per call that reached Parley with a known key, admitted or
refused, read back with filters and a cursor.

A line is a usage record (``domain/usage.py``) joined with its key's label and prefix
and its group's name. Refusals are records with ``admitted`` false and no usage. No line
holds a prompt or a reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from parley.domain.usage import UsageRecord

DIALECTS = (
    ("/v1/messages", "anthropic"),
    ("/v1/responses", "openai-responses"),
)
"""Endpoint path prefixes whose caller speaks another dialect than OpenAI chat's."""


def dialect_of(endpoint: str) -> str:
    """The dialect a caller spoke, from the endpoint path its call reached."""
    for prefix, dialect in DIALECTS:
        if endpoint.startswith(prefix):
            return dialect
    return "openai"


@dataclass(frozen=True, slots=True)
class StatusFilter:
    """A status code (``429``) or a class (``4xx``: 400 to 499)."""

    low: int
    high: int
    """Both included."""


@dataclass(frozen=True, slots=True)
class RequestQuery:
    """Which lines to read: newest first, ``after`` (a cursor) excluded."""

    since: datetime | None = None
    until: datetime | None = None
    """Exclusive."""
    group_id: int | None = None
    key_id: int | None = None
    model: str | None = None
    """Matches the model that answered or the name the caller asked for."""
    status: StatusFilter | None = None
    request_prefix: str | None = None
    """Lines whose request id starts with this: a batch's lines, or every batch's."""
    after: tuple[datetime, str] | None = None
    """The last line of the previous page: its time and request id."""
    limit: int = 50


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    record: UsageRecord
    group: str | None
    """The group's name (None if the group is gone)."""
    key_name: str | None
    key_prefix: str | None
    """The prefix of the secret that made the call (not the key's current one after a
    rotation); None when that is not known (a line older than the record of prefixes,
    of a key rotated since)."""

    @property
    def dialect(self) -> str:
        return dialect_of(self.record.endpoint)


@dataclass(frozen=True, slots=True)
class StatusCounts:
    """Failed calls and refusals of one UTC day, by kind."""

    client_errors: int = 0
    """4xx other than 429 (a bad request, an unknown model, a revoked key, a hang-up)."""
    rate_limited: int = 0
    """429: rates or budget."""
    server_errors: int = 0
    """5xx: upstream failures, outages, shutdown."""
