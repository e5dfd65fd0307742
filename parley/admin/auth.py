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
* Wrong credentials (API or login form) are counted per client address, and per
  account name for a password: a request with no credential at all counts for nothing,
  and a right credential is never refused. After ``MAX_FAILURES`` wrong ones within
  ``FAILURE_WINDOW`` seconds that address (or name) is locked out: each further wrong
  attempt is answered 429 rather than 401, after a delay that doubles with each one
  (``FAILURE_DELAY`` up to ``MAX_FAILURE_DELAY``), so a guesser waits while the
  operator with the right token or password is let in at once.
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
FAILURE_DELAY = 0.5
"""The wait before answering the first wrong attempt past ``MAX_FAILURES``; it doubles
with each further one."""
MAX_FAILURE_DELAY = 8.0
MAX_TRACKED_ADDRESSES = 10_000
MAX_TRACKED_FAILURES = 64
"""Failure times kept per address: enough for the delay to reach its ceiling."""


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


@dataclass(frozen=True, slots=True)
class Failure:
    """What one wrong credential led to, for one address or account name."""

    locked_out: bool
    """Past ``MAX_FAILURES``: answer 429 (``refusal``) instead of 401."""
    began_lock_out: bool
    """This failure locked the source out (audit it, once an episode)."""
    delay: float
    """Seconds to wait before answering."""
    refusal: RateLimited | None = None


class FailedAttempts:
    """Wrong credentials per client address (or account name) in a sliding window,
    bounded in memory. Only ``failed`` counts, so only a wrong credential can lock a
    source out, and nothing here refuses a right one."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def locked_out(self, source: str) -> bool:
        return len(self._recent(source)) >= MAX_FAILURES

    def failed(self, source: str) -> Failure:
        """Count one wrong credential from ``source``: what it led to."""
        failures = self._recent(source)
        was_locked = len(failures) >= MAX_FAILURES
        failures.append(self._clock())
        self._failures[source] = failures
        self._failures.move_to_end(source)
        while len(self._failures) > MAX_TRACKED_ADDRESSES:
            self._failures.popitem(last=False)
        past = len(failures) - MAX_FAILURES
        if past < 0:
            return Failure(locked_out=False, began_lock_out=False, delay=0.0)
        delay = min(MAX_FAILURE_DELAY, FAILURE_DELAY * 2 ** (past - 1)) if past else 0.0
        return Failure(
            locked_out=was_locked,
            began_lock_out=not was_locked,
            delay=delay,
            refusal=self._refusal(failures) if was_locked else None,
        )

    def succeeded(self, address: str) -> None:
        self._failures.pop(address, None)

    def _refusal(self, failures: deque[float]) -> RateLimited:
        wait = int(failures[-MAX_FAILURES] + FAILURE_WINDOW - self._clock()) + 1
        minutes = max(1, round(wait / 60))
        return RateLimited(
            f"Too many failed sign-in attempts from your address. "
            f"Try again in about {minutes} minute{'s' if minutes != 1 else ''}.",
            kind="requests",
            headers={"retry-after": str(wait)},
        )

    def _recent(self, source: str) -> deque[float]:
        failures = self._failures.get(source) or deque(maxlen=MAX_TRACKED_FAILURES)
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
