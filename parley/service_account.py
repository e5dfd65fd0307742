"""A Google service-account key file, read and checked.

``read_account`` reads the JSON file a ``type: vertex`` channel names. The settings call
it as they are validated (``catalog_settings.VertexOptions``), so a missing or wrong file
stops the start with one line; the Vertex adapter (``providers/vertex/account.py``)
signs token requests with the key it holds. A leaf module, below the settings and the
providers both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


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
