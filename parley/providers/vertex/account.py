"""The JWT a Google service account's key signs.

The key file is read and checked by ``parley.service_account.read_account``;
``Signer.assertion`` writes the signed JWT (RS256) that the file's ``token_uri``
exchanges for an OAuth access token (RFC 7523). ``cryptography`` is imported here only
when a key is first loaded, so a gateway without a Vertex channel never carries it.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from parley.service_account import AccountError, ServiceAccount

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
LIFETIME = 3600
"""Seconds a signed assertion (and so the token it buys) is asked to last, Google's most."""


class Signer:
    """Signs token requests with the account's key (loaded once, at construction)."""

    __slots__ = ("_account", "_key")

    def __init__(self, account: ServiceAccount) -> None:
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            key = load_pem_private_key(account.private_key.encode(), password=None)
        except (ValueError, TypeError):
            raise AccountError("the service account's private_key cannot be loaded") from None
        if not isinstance(key, RSAPrivateKey):
            raise AccountError("the service account's private_key is not an RSA key")
        self._account = account
        self._key = key

    @property
    def token_uri(self) -> str:
        return self._account.token_uri

    def assertion(self, now: float | None = None) -> str:
        """A JWT asking ``token_uri`` for a ``cloud-platform`` access token, signed RS256."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        issued = int(now if now is not None else time.time())
        header = {"alg": "RS256", "typ": "JWT"}
        if self._account.private_key_id:
            header["kid"] = self._account.private_key_id
        claims = {
            "iss": self._account.client_email,
            "scope": SCOPE,
            "aud": self._account.token_uri,
            "iat": issued,
            "exp": issued + LIFETIME,
        }
        signed = f"{_b64(_json(header))}.{_b64(_json(claims))}"
        signature = self._key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signed}.{_b64(signature)}"


def _json(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
