"""Sealing the provider credentials of channels kept in the database.

A ``CredentialBox`` holds the operator's keys (``admin.secret_keys``, usually from the
``PARLEY_SECRET_KEYS`` environment variable): Fernet (AES-128-CBC with HMAC-SHA256,
from ``cryptography``) under ``MultiFernet``, so the first key seals and every key
opens. Rotation: put a new key first, keep the old ones after it, run ``parley channels
reseal`` (or ``POST /admin/channels/reseal``) to seal every credential with the new key,
then drop the old keys. The keys never leave this object; a credential that no key opens
is an error naming the channel, never the bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet


class SealError(Exception):
    """No key is configured, a key is malformed, or no key opens a sealed credential."""


NO_KEYS = (
    "No secret key is configured to seal channel credentials: set PARLEY_SECRET_KEYS "
    "(make one with `parley channels new-key`)."
)


def new_key() -> str:
    """A fresh key, as the setting takes it."""
    return Fernet.generate_key().decode("ascii")


class CredentialBox:
    __slots__ = ("_fernet",)

    def __init__(self, keys: Sequence[str]) -> None:
        fernets: list[Fernet] = []
        for number, key in enumerate(keys, 1):
            try:
                fernets.append(Fernet(key.encode("ascii")))
            except (ValueError, UnicodeEncodeError):
                raise SealError(
                    f"secret key #{number} is not a key made by `parley channels new-key` "
                    "(32 url-safe base64-encoded bytes)"
                ) from None
        self._fernet = MultiFernet(fernets) if fernets else None

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
        except (InvalidToken, UnicodeError):
            raise SealError(
                f"no configured secret key opens the credential of channel `{channel}`"
            ) from None

    def reseal(self, sealed: str, channel: str) -> str:
        """The credential sealed with the first key (opened with any)."""
        if self._fernet is None:
            raise SealError(NO_KEYS)
        try:
            return self._fernet.rotate(sealed.encode("ascii")).decode("ascii")
        except InvalidToken:
            raise SealError(
                f"no configured secret key opens the credential of channel `{channel}`"
            ) from None
