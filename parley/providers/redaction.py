"""Taking credentials out of text an upstream wrote, before a caller may see it.

An upstream's error message is relayed when the request itself was at fault, and some
upstreams (or the proxies in front of them) echo the request's headers in it. Removed:
the channel's own key wherever it appears, and anything shaped like a credential: an
``Authorization``-style header's value, a bearer token, an ``sk-``-style key, a JWT.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4
"""A configured key shorter than this is not searched for literally (it would mangle
ordinary words); the shapes below still apply."""

_CREDENTIALS = re.compile(
    r"""
    (?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]?key|\bx-goog-api-key)
    (?P<sep>["']?\s*[:=]\s*["']?)
    (?:(?:bearer|basic|token)\s+)?[^\s"',;}]+
  | \bbearer\s+[A-Za-z0-9._~+/=-]{6,}
  | \b(?:sk|rk|pk)-[A-Za-z0-9_-]{8,}
  | \beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*
    """,
    re.IGNORECASE | re.VERBOSE,
)


def redact(text: str, secret: str | None) -> str:
    """``text`` without ``secret`` and without anything shaped like a credential."""
    if secret and len(secret) >= MIN_SECRET_CHARS and secret in text:
        text = text.replace(secret, REDACTED)
    return _CREDENTIALS.sub(_replacement, text)


def _replacement(match: re.Match[str]) -> str:
    name = match.group("name")
    if name is None:
        return REDACTED
    return f"{name}{match.group('sep')}{REDACTED}"
