"""OpenAI's ``x-ratelimit-*`` headers, written from a limiter ``Decision``."""

from __future__ import annotations

import math

from parley.limits.base import Decision


def go_duration(seconds: float) -> str:
    """Seconds as a Go duration string, as OpenAI writes resets: ``12ms``, ``1s``, ``6m0s``."""
    if seconds <= 0:
        return "0s"
    millis = math.ceil(seconds * 1000)
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
    window = decision.requests
    if window is not None:
        headers["x-ratelimit-limit-requests"] = str(window.limit)
        headers["x-ratelimit-remaining-requests"] = str(window.remaining)
        headers["x-ratelimit-reset-requests"] = go_duration(window.reset_seconds)
    window = decision.tokens
    if window is not None:
        headers["x-ratelimit-limit-tokens"] = str(window.limit)
        headers["x-ratelimit-remaining-tokens"] = str(window.remaining)
        headers["x-ratelimit-reset-tokens"] = go_duration(window.reset_seconds)
    return headers


def retry_headers(seconds: float) -> dict[str, str]:
    """``retry-after`` (whole seconds, rounded up) and ``retry-after-ms`` for a 429."""
    return {
        "retry-after": str(max(1, math.ceil(seconds))),
        "retry-after-ms": str(max(1, math.ceil(seconds * 1000))),
    }
