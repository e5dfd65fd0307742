"""Who may use /admin: the admin token as a Bearer header (API) or a signed session
cookie (dashboard), and a brake on guessing.

* The token is compared by SHA-256 digest with ``hmac.compare_digest`` (constant time).
  Only ``Authorization: Bearer <token>`` is accepted; a bare token or another scheme is
  refused like any malformed header.
* An administrator account (``accounts.py``) signs in with its name and password; the
  API takes them as HTTP Basic credentials. What each may do is ``roles.py``'s table.
* A dashboard session is a cookie signed (itsdangerous, HMAC-SHA256) with a key derived
  from the admin token: it holds a random session id and the CSRF token, never the
  admin token; it expires after ``SESSION_SECONDS``; changing the token ends every
  session. Logging out forgets the session id in this process and clears the cookie.
* Failed attempts (API or login form) are counted per client address: after
  ``MAX_FAILURES`` within ``FAILURE_WINDOW`` seconds that address is refused until
  the window passes.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer

from parley.errors import RateLimited

SESSION_SECONDS = 8 * 3600
MAX_FAILURES = 5
FAILURE_WINDOW = 300.0
MAX_TRACKED_ADDRESSES = 10_000


def bearer_token(authorization: str | None) -> str | None:
    """The token of a well-formed ``Bearer`` header, else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


def token_matches(given: str | None, token: str) -> bool:
    """Constant-time comparison of digests (equal lengths whatever was given)."""
    if given is None:
        return False
    wanted = hashlib.sha256(token.encode("utf-8")).digest()
    return hmac.compare_digest(hashlib.sha256(given.encode("utf-8")).digest(), wanted)


class FailedAttempts:
    """Failures per client address in a sliding window, bounded in memory."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def check(self, address: str) -> None:
        """Raise ``RateLimited`` while the address has used up its attempts."""
        failures = self._recent(address)
        if len(failures) >= MAX_FAILURES:
            wait = int(failures[0] + FAILURE_WINDOW - self._clock()) + 1
            minutes = max(1, round(wait / 60))
            raise RateLimited(
                f"Too many failed sign-in attempts from your address. "
                f"Try again in about {minutes} minute{'s' if minutes != 1 else ''}.",
                kind="requests",
                headers={"retry-after": str(wait)},
            )

    def failed(self, address: str) -> None:
        failures = self._recent(address)
        failures.append(self._clock())
        self._failures[address] = failures
        self._failures.move_to_end(address)
        while len(self._failures) > MAX_TRACKED_ADDRESSES:
            self._failures.popitem(last=False)

    def succeeded(self, address: str) -> None:
        self._failures.pop(address, None)

    def _recent(self, address: str) -> deque[float]:
        failures = self._failures.get(address, deque())
        while failures and failures[0] <= self._clock() - FAILURE_WINDOW:
            failures.popleft()
        return failures


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    csrf: str
    who: str = "token"
    """The account signed in, or ``token`` (signed in with the admin token)."""

    @property
    def actor(self) -> str:
        return self.who


class Sessions:
    """Signed session cookies; the signing key is derived from the admin token."""

    def __init__(self, token: str, max_age: int = SESSION_SECONDS) -> None:
        key = hmac.new(token.encode("utf-8"), b"parley admin session", hashlib.sha256).digest()
        self._serializer = URLSafeTimedSerializer(key, salt="parley.admin.session")
        self.max_age = max_age
        self._ended: dict[str, float] = {}
        """Session ids logged out in this process, with when (kept until they expire)."""

    def new(self, who: str = "token") -> tuple[Session, str]:
        """A fresh session of ``who`` (an account, or ``token``) and its cookie value."""
        session = Session(secrets.token_urlsafe(16), secrets.token_urlsafe(24), who)
        data = {"sid": session.id, "csrf": session.csrf, "who": who}
        return session, self._serializer.dumps(data)

    def read(self, cookie: str | None) -> Session | None:
        if not cookie:
            return None
        try:
            data = self._serializer.loads(cookie, max_age=self.max_age)
        except BadSignature:  # also SignatureExpired
            return None
        if not isinstance(data, dict):
            return None
        sid, csrf, who = data.get("sid"), data.get("csrf"), data.get("who", "token")
        if not isinstance(sid, str) or not isinstance(csrf, str) or sid in self._ended:
            return None
        return Session(sid, csrf, who if isinstance(who, str) else "token")

    def end(self, session: Session) -> None:
        now = time.monotonic()
        self._ended = {sid: at for sid, at in self._ended.items() if at > now - self.max_age}
        self._ended[session.id] = now


def same_secret(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))
