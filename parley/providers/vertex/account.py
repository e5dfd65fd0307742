"""A Google service-account key file, read and checked, and the JWT its key signs.

``read_account`` reads the JSON file a ``type: vertex`` channel names (as the settings
are validated, so a missing or wrong file stops the start with one line); ``assertion``
writes the signed JWT (RS256) that the file's ``token_uri`` exchanges for an OAuth
access token (RFC 7523). ``cryptography`` is imported here only when a key is first
loaded, so a gateway without a Vertex channel never carries it.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
LIFETIME = 3600
"""Seconds a signed assertion (and so the token it buys) is asked to last, Google's most."""


class AccountError(ValueError):
    """The credentials file cannot be used; worded for the operator in one line."""


@dataclass(frozen=True, slots=True)
class ServiceAccount:
    client_email: str
    private_key_id: str
    token_uri: str
    private_key: str = field(repr=False)
    """The PEM key: never printed, logged or sent."""


def read_account(path: str) -> ServiceAccount:
    """The service account in the key file at ``path``; ``AccountError`` if it is not one."""
    try:
        with open(path, encoding="utf-8") as file:
            found: Any = json.load(file)
    except OSError as error:
        raise AccountError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError:
        raise AccountError(f"{path} is not a JSON service-account key file") from None
    if not isinstance(found, dict) or found.get("type") != "service_account":
        raise AccountError(
            f"{path} is not a service-account key file (its type must be service_account)"
        )
    values = {}
    for name in ("client_email", "private_key", "token_uri"):
        value = found.get(name)
        if not isinstance(value, str) or not value:
            raise AccountError(f"{path} has no {name}")
        values[name] = value
    if "PRIVATE KEY-----" not in values["private_key"]:
        raise AccountError(f"{path}: private_key is not a PEM private key")
    if not values["token_uri"].startswith(("https://", "http://")):
        raise AccountError(f"{path}: token_uri must be an http(s) URL")
    key_id = found.get("private_key_id")
    return ServiceAccount(
        client_email=values["client_email"],
        private_key_id=key_id if isinstance(key_id, str) else "",
        token_uri=values["token_uri"],
        private_key=values["private_key"],
    )


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
