"""Administrator passwords, hashed with scrypt (``hashlib``, the standard library).

scrypt is memory-hard: each guess costs ``128 * N * r`` bytes of memory as well as CPU
time, which is what makes guessing on GPUs and ASICs dear. The parameters are OWASP's
for scrypt (N=2^17, r=8, p=1: 128 MiB a hash); argon2id is as good but needs a native
package, and scrypt needs none. A hash is stored as
``scrypt$<log2 N>$<r>$<p>$<salt>$<hash>`` (base64), so the parameters can be raised
later without locking anyone out: a password checked against older parameters is
hashed again (``outdated``).

Hashing runs in a thread, at most ``CONCURRENT`` at once (each takes 128 MiB), so the
event loop never waits on it and a burst of sign-ins cannot exhaust the memory.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict

LOG2_N, R, P = 17, 8, 1
SALT_BYTES, HASH_BYTES = 16, 32
CONCURRENT = 2
_MAXMEM = 256 * 1024 * 1024
VERIFIED_SECONDS = 60.0
MAX_VERIFIED = 1000


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _scrypt(password: str, salt: bytes, log2_n: int, r: int, p: int) -> bytes:
    data = password.encode("utf-8")
    return hashlib.scrypt(
        data, salt=salt, n=1 << log2_n, r=r, p=p, maxmem=_MAXMEM, dklen=HASH_BYTES
    )


def hash_password_now(password: str) -> str:
    salt = secrets.token_bytes(SALT_BYTES)
    digest = _scrypt(password, salt, LOG2_N, R, P)
    return f"scrypt${LOG2_N}${R}${P}${_b64(salt)}${_b64(digest)}"


def verify_now(password: str, stored: str) -> bool:
    try:
        scheme, log2_n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt" or not 10 <= int(log2_n) <= 20:
            return False
        wanted = base64.b64decode(digest)
        found = _scrypt(password, base64.b64decode(salt), int(log2_n), int(r), int(p))
    except (ValueError, MemoryError):
        return False
    return hmac.compare_digest(found, wanted)


def outdated(stored: str) -> bool:
    """Whether ``stored`` was made with other parameters than today's."""
    return not stored.startswith(f"scrypt${LOG2_N}${R}${P}$")


class Hasher:
    """Hashing and checking off the event loop, ``CONCURRENT`` at a time (one per admin
    sub-application, kept in its ``AdminState``)."""

    def __init__(self) -> None:
        self._slots = asyncio.Semaphore(CONCURRENT)

    async def hash(self, password: str) -> str:
        async with self._slots:
            return await asyncio.to_thread(hash_password_now, password)

    async def verify(self, password: str, stored: str) -> bool:
        async with self._slots:
            return await asyncio.to_thread(verify_now, password, stored)


class VerifiedPasswords:
    """Passwords recently checked, by an HMAC with a per-process key, bound to the hash
    they were checked against."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._seen: OrderedDict[bytes, tuple[str, float]] = OrderedDict()

    def _mark(self, name: str, password: str) -> bytes:
        return hmac.new(self._key, f"{name}\0{password}".encode(), hashlib.sha256).digest()

    def known(self, name: str, password: str, stored_hash: str) -> bool:
        found = self._seen.get(self._mark(name, password))
        return found is not None and found[0] == stored_hash and found[1] > time.monotonic()

    def remember(self, name: str, password: str, stored_hash: str) -> None:
        mark = self._mark(name, password)
        self._seen[mark] = (stored_hash, time.monotonic() + VERIFIED_SECONDS)
        self._seen.move_to_end(mark)
        while len(self._seen) > MAX_VERIFIED:
            self._seen.popitem(last=False)
