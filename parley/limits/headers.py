"""OpenAI's ``x-ratelimit-*`` headers, written from a limiter ``Decision``."""

from __future__ import annotations

import math

from parley.limits.base import Decision, Window


def go_duration(seconds: float) -> str:
    """Seconds as a Go duration string, as OpenAI writes resets: ``12ms``, ``1s``, ``6m0s``."""
    millis = max(0, math.ceil(seconds * 1000))
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    """The six headers for every limited dimension (an unlimited one has none)."""
    headers: dict[str, str] = {}
    _add(headers, "requests", decision.requests)
    _add(headers, "tokens", decision.tokens)
    return headers


def retry_headers(seconds: float) -> dict[str, str]:
    """``retry-after`` (whole seconds, rounded up) and ``retry-after-ms`` for a 429."""
    return {
        "retry-after": str(max(1, math.ceil(seconds))),
        "retry-after-ms": str(max(1, math.ceil(seconds * 1000))),
    }


_NAMES = {
    dimension: (
        f"x-ratelimit-limit-{dimension}",
        f"x-ratelimit-remaining-{dimension}",
        f"x-ratelimit-reset-{dimension}",
    )
    for dimension in ("requests", "tokens")
}
"""The three header names of each dimension, made once (every reply carries them)."""


def _add(headers: dict[str, str], dimension: str, window: Window | None) -> None:
    if window is None:
        return
    limit, remaining, reset = _NAMES[dimension]
    headers[limit] = str(window.limit)
    headers[remaining] = str(window.remaining)
    headers[reset] = go_duration(window.reset_seconds)
