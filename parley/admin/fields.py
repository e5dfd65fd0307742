"""The admin API's body fields, checked alike wherever an operator gives them: the JSON
API, and the CLI, which builds the same body from its options.

Free of aiohttp, so that an admin command loads no web server. A field that breaks a
rule is an ``InvalidRequest`` naming it (the caller's 400, or the CLI's one line).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from parley.domain.content import (
    CONTENT_POLICIES,
    MAX_RETENTION_DAYS,
    ContentLogging,
    ContentPolicy,
    content_policy,
)
from parley.domain.pricing import usd_to_nanos
from parley.errors import InvalidRequest
from parley.store.base import KeyChanges

MAX_LIMIT = 2_147_483_647
"""Largest rpm, tpm, key id or day count the store's columns hold (32-bit on PostgreSQL)."""
MAX_BUDGET_USD = 1_000_000_000
"""Largest budget: its nano-dollars fit the store's 64-bit column."""
MAX_NAME = 200
MAX_GRACE_SECONDS = 30 * 86_400
"""The longest an old secret may stay valid after a rotation: 30 days."""
DEFAULT_GRACE_SECONDS = 3_600
"""An hour, when the operator does not say: time to roll the new secret out."""


def optional_int(body: dict[str, Any], name: str) -> int | None:
    """A positive integer the store's 32-bit columns hold, or ``None`` when absent or null."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidRequest(
            f"'{name}' must be a positive integer (at most {MAX_LIMIT}) or null.", param=name
        )
    return value


def printable(value: Any, name: str) -> str:
    """A name the store can hold: a string of at most 200 characters, no control bytes."""
    if not isinstance(value, str) or len(value) > MAX_NAME or not value.isprintable():
        raise InvalidRequest(
            f"'{name}' must be a string of at most {MAX_NAME} printable characters.", param=name
        )
    return value


def models_field(body: dict[str, Any]) -> frozenset[str] | None:
    """``models``: an array of model names, or absent or null for no restriction."""
    value = body.get("models")
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise InvalidRequest("'models' must be an array of model names or null.", param="models")
    return frozenset(printable(name, "models") for name in value)


def budget_field(body: dict[str, Any]) -> int | None:
    """``budget_usd`` in nano-dollars: a number from 0, or absent or null for none."""
    value = body.get("budget_usd")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        value = -1
    if not 0 <= value <= MAX_BUDGET_USD:
        raise InvalidRequest(
            f"'budget_usd' must be a number from 0 to {MAX_BUDGET_USD} or null.",
            param="budget_usd",
        )
    return usd_to_nanos(value)


def content_policy_field(body: dict[str, Any]) -> ContentPolicy | None:
    """``content_policy``: what the group's content log keeps, or absent to leave it."""
    value = body.get("content_policy")
    if value is None:
        return None
    try:
        return content_policy(value) if isinstance(value, str) else content_policy("")
    except ValueError:
        raise InvalidRequest(
            f"'content_policy' must be one of {', '.join(CONTENT_POLICIES)}.",
            param="content_policy",
        ) from None


def retention_field(body: dict[str, Any]) -> int | None:
    """``content_retention_days``: 1 to ``MAX_RETENTION_DAYS``, or absent to leave it."""
    value = body.get("content_retention_days")
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 1 <= value <= MAX_RETENTION_DAYS
    ):
        raise InvalidRequest(
            f"'content_retention_days' must be a whole number from 1 to {MAX_RETENTION_DAYS}.",
            param="content_retention_days",
        )
    return value


def check_sealable(policy: str | None, can_seal: bool) -> None:
    """Refuse a ``policy`` that keeps text when the gateway has no key to seal it."""
    if policy in {"redacted", "full"} and not can_seal:
        raise InvalidRequest(
            f"A '{policy}' content policy keeps prompts and replies sealed, and no secret "
            "key is set to seal them: set PARLEY_SECRET_KEYS (`parley channels new-key`).",
            param="content_policy",
        )


def content_logging(body: dict[str, Any]) -> ContentLogging:
    """A new group's content policy and retention (``off`` and the default if absent)."""
    default = ContentLogging()
    return ContentLogging(
        content_policy_field(body) or default.policy,
        retention_field(body) or default.retention_days,
    )


def expiry(body: dict[str, Any]) -> datetime | None:
    """``expires_at`` as an ISO 8601 time (a zone-less one is UTC), or ``expires_in_days``."""
    days = optional_int(body, "expires_in_days")
    if days is not None:
        return datetime.now(UTC) + timedelta(days=min(days, 36_500))
    raw = body.get("expires_at")
    if raw is None:
        return None
    try:
        if not isinstance(raw, str) or len(raw) > 40:
            raise ValueError(raw)
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(
            "'expires_at' must be an ISO 8601 time, e.g. 2027-01-31T00:00:00Z, or null.",
            param="expires_at",
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def key_changes(body: dict[str, Any]) -> KeyChanges:
    """What a PATCH asks for: a field present and null clears it (back to the group's)."""
    name = body.get("name")
    return KeyChanges(
        name=printable(name, "name") if name is not None else None,
        rpm=optional_int(body, "rpm"),
        tpm=optional_int(body, "tpm"),
        models=models_field(body),
        budget_nanos=budget_field(body),
        expires_at=expiry(body),
        clear_rpm="rpm" in body and body["rpm"] is None,
        clear_tpm="tpm" in body and body["tpm"] is None,
        clear_models="models" in body and body["models"] is None,
        clear_budget="budget_usd" in body and body["budget_usd"] is None,
        clear_expiry="expires_at" in body and body["expires_at"] is None,
    )


def grace(body: dict[str, Any]) -> timedelta:
    """``grace_seconds``: how long a rotated key's old secret stays valid (default an hour)."""
    value = body.get("grace_seconds", DEFAULT_GRACE_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_GRACE_SECONDS:
        raise InvalidRequest(
            f"'grace_seconds' must be a whole number from 0 to {MAX_GRACE_SECONDS}.",
            param="grace_seconds",
        )
    return timedelta(seconds=value)
