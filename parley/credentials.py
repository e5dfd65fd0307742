"""Sealing the provider credentials of channels kept in the database (and the calls'
content a group's policy keeps, ``runtime/content_log.py``).

A ``CredentialBox`` holds the operator's keys (``admin.secret_keys``, usually from the
``PARLEY_SECRET_KEYS`` environment variable): Fernet (AES-128-CBC with HMAC-SHA256,
from ``cryptography``) under ``MultiFernet``, so the first key seals and every key
opens. Rotation: put a new key first, keep the old ones after it, run ``parley channels
reseal`` (or ``POST /admin/channels/reseal``) to seal every credential with the new key,
then drop the old keys. The keys never leave this object; a credential that no key opens
is an error naming the channel, never the bytes.

``cryptography`` (a sizeable import, docs/configuration.md) is loaded only when keys are set: a
gateway that stores no credential never loads it.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet


class SealError(Exception):
    """No key is configured, a key is malformed, or no key opens a sealed credential."""


NO_KEYS = (
    "No secret key is configured to seal channel credentials: set PARLEY_SECRET_KEYS "
    "(make one with `parley channels new-key`)."
)


def _fernet_module() -> ModuleType:
    return importlib.import_module("cryptography.fernet")


def new_key() -> str:
    """A fresh key, as the setting takes it."""
    key: bytes = _fernet_module().Fernet.generate_key()
    return key.decode("ascii")


class CredentialBox:
    __slots__ = ("_fernet", "_invalid")

    def __init__(self, keys: Sequence[str]) -> None:
        self._fernet: MultiFernet | None = None
        self._invalid: type[Exception] = ValueError
        if not keys:
            return
        fernet = _fernet_module()
        self._invalid = fernet.InvalidToken
        fernets = []
        for number, key in enumerate(keys, 1):
            try:
                fernets.append(fernet.Fernet(key.encode("ascii")))
            except (ValueError, UnicodeEncodeError):
                raise SealError(
                    f"secret key #{number} is not a key made by `parley channels new-key` "
                    "(32 url-safe base64-encoded bytes)"
                ) from None
        self._fernet = fernet.MultiFernet(fernets)

    @property
    def ready(self) -> bool:
        return self._fernet is not None

    def seal(self, secret: str) -> str:
        if self._fernet is None:
            raise SealError(NO_KEYS)
        return self._fernet.encrypt(secret.encode("utf-8")).decode("ascii")

    def open(self, sealed: str, channel: str) -> str:
        if self._fernet is None:
            raise SealError(f"channel `{channel}` has a sealed credential but {NO_KEYS[3:]}")
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode("utf-8")
        except (self._invalid, UnicodeError):
            raise SealError(
                f"no configured secret key opens the credential of channel `{channel}`"
            ) from None

    def open_sealed(self, sealed: str, what: str) -> str:
        """``sealed`` opened, for what is not a channel's credential (a call's kept
        content); ``what`` names it in the error."""
        if self._fernet is None:
            raise SealError(f"{what} is sealed but no secret key is set (PARLEY_SECRET_KEYS)")
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode("utf-8")
        except (self._invalid, UnicodeError):
            raise SealError(f"no configured secret key opens {what}") from None

    def reseal(self, sealed: str, channel: str) -> str:
        """The credential sealed with the first key (opened with any)."""
        if self._fernet is None:
            raise SealError(NO_KEYS)
        try:
            return self._fernet.rotate(sealed.encode("ascii")).decode("ascii")
        except self._invalid:
            raise SealError(
                f"no configured secret key opens the credential of channel `{channel}`"
            ) from None
