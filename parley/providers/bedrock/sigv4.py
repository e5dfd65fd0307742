"""AWS Signature Version 4 for one JSON POST, with ``hmac`` and ``hashlib`` alone.

Bedrock's runtime takes requests signed this way (service ``bedrock``). The signature
covers the method, the path as sent with each segment percent-encoded once more (AWS's
rule for every service but S3, so a model id's ``:`` goes on the wire as ``%3A`` and is
signed as ``%253A``), the query, the signed headers (``content-type``, ``host``,
``x-amz-date`` and, for temporary credentials, ``x-amz-security-token``) and the
SHA-256 of the body. The day's signing key is derived once and kept.

Written here rather than imported from botocore, which a serving process would carry
for this one function (docs/development.md, Bedrock); ``tests/unit/test_sigv4.py``
checks it against botocore's signer.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import quote, unquote

ALGORITHM = "AWS4-HMAC-SHA256"
_UNRESERVED = "-_.~"


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key pair, and the session token of temporary credentials."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


def encode_segment(segment: str) -> str:
    """One path segment percent-encoded as AWS does (only ``A-Za-z0-9-_.~`` kept)."""
    return quote(segment, safe=_UNRESERVED)


class Signer:
    """Signs requests for one region and service with one set of credentials."""

    __slots__ = ("_keys", "credentials", "region", "service")

    def __init__(self, credentials: Credentials, region: str, service: str) -> None:
        self.credentials = credentials
        self.region = region
        self.service = service
        self._keys: tuple[str, bytes] | None = None
        """The last day's date stamp and its signing key."""

    def headers(
        self,
        method: str,
        host: str,
        path: str,
        *,
        query: str,
        body: bytes,
        content_type: str,
        now: datetime,
    ) -> dict[str, str]:
        """The headers to send (``Content-Type``, ``X-Amz-Date``, the session token and
        ``Authorization``) for a request to ``host`` (with its port, as the ``Host`` header
        says it) at ``path`` (already percent-encoded, as sent) with ``query``
        (``name=value`` pairs joined by ``&``, encoded) at the UTC time ``now``."""
        stamp = now.strftime("%Y%m%dT%H%M%SZ")
        day = stamp[:8]
        signed: list[tuple[str, str]] = [
            ("content-type", content_type),
            ("host", host),
            ("x-amz-date", stamp),
        ]
        token = self.credentials.session_token
        if token:
            signed.append(("x-amz-security-token", token))
        names = ";".join(name for name, _ in signed)
        canonical = "\n".join(
            (
                method,
                canonical_path(path),
                canonical_query(query),
                "".join(f"{name}:{' '.join(value.split())}\n" for name, value in signed),
                names,
                hashlib.sha256(body).hexdigest(),
            )
        )
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = "\n".join(
            (ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode()).hexdigest())
        )
        signature = hmac.new(self._key(day), to_sign.encode(), hashlib.sha256).hexdigest()
        headers = {"Content-Type": content_type, "X-Amz-Date": stamp}
        if token:
            headers["X-Amz-Security-Token"] = token
        headers["Authorization"] = (
            f"{ALGORITHM} Credential={self.credentials.access_key_id}/{scope}, "
            f"SignedHeaders={names}, Signature={signature}"
        )
        return headers

    def _key(self, day: str) -> bytes:
        keys = self._keys
        if keys is not None and keys[0] == day:
            return keys[1]
        key = f"AWS4{self.credentials.secret_access_key}".encode()
        for part in (day, self.region, self.service, "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        self._keys = (day, key)
        return key


def canonical_path(path: str) -> str:
    """The path as sent, each segment percent-encoded again (``%`` becomes ``%25``)."""
    return quote(path or "/", safe="/" + _UNRESERVED)


def canonical_query(query: str) -> str:
    """The query's pairs, each name and value encoded AWS's way, sorted."""
    if not query:
        return ""
    pairs = []
    for part in query.split("&"):
        name, _, value = part.partition("=")
        pairs.append((_reencode(name), _reencode(value)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _reencode(value: str) -> str:
    return quote(unquote(value), safe=_UNRESERVED)
