"""OAuth access tokens for one Vertex AI channel, minted from its service account, cached,
and refreshed before they expire, off the hot path.

``token()`` is what a call awaits: the cached token while it is fresh (no I/O); once it
is past its refresh point (``REFRESH_MARGIN`` before expiry, or half its life for short
ones) the call still gets it and one background task mints the next; only a call that
finds no usable token at all (the first, or after failures) waits, and then for the one
mint in flight (single-flight: never one mint per call while a token is usable). A
failed background mint is logged by status only and tried again by a later call,
``RETRY_SECONDS`` after it at the soonest; a failed mint a call waited for is that call's
error (a 502 naming the channel, which the router falls over from and the breaker
counts). The token and the assertion are never logged nor put in an error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from urllib.parse import urlencode

from parley import upstream_json
from parley.errors import UpstreamError, UpstreamRefused
from parley.http import HttpClient, prepare
from parley.providers.base import upstream_errors
from parley.providers.vertex.account import Signer

log = logging.getLogger("parley.vertex")

GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
REFRESH_MARGIN = 300.0
"""Seconds before expiry a token is replaced."""
USABLE_MARGIN = 30.0
"""Seconds before expiry a token is no longer sent (it could expire on the way)."""
RETRY_SECONDS = 5.0
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0
MAX_REPLY_BYTES = 64 * 1024


class AccessTokens:
    """One channel's token, as ``token()`` says."""

    __slots__ = (
        "_channel",
        "_clock",
        "_expires",
        "_failed_at",
        "_http",
        "_minting",
        "_refresh_at",
        "_signer",
        "_token",
        "mints",
    )

    def __init__(
        self,
        channel: str,
        signer: Signer,
        http: HttpClient,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._channel = channel
        self._signer = signer
        self._http = http
        self._clock = clock
        self._token: str | None = None
        self._expires = 0.0
        self._refresh_at = 0.0
        self._failed_at = -RETRY_SECONDS
        self._minting: asyncio.Task[str] | None = None
        self.mints = 0
        """Tokens minted so far (for tests and metrics)."""

    def prefetch(self) -> None:
        """Start minting the first token now (at start-up), so the first call need not wait
        for it; a failure is logged and the first call tries again."""
        if self._token is None and self._minting is None:
            self._start_mint()

    def forget(self) -> None:
        """Drop the token the upstream refused: the next call waits for a fresh one (the
        mint in flight, if any)."""
        self._token = None

    async def token(self) -> str:
        now = self._clock()
        token = self._token
        if token is not None and now < self._refresh_at:
            return token
        if token is not None and now < self._expires - USABLE_MARGIN:
            if self._minting is None and now - self._failed_at >= RETRY_SECONDS:
                self._start_mint()
            return token
        minting = self._minting or self._start_mint()
        return await asyncio.shield(minting)

    def _start_mint(self) -> asyncio.Task[str]:
        task = asyncio.get_running_loop().create_task(self._mint(), name="parley-vertex-token")
        task.add_done_callback(self._minted)
        self._minting = task
        return task

    def _minted(self, task: asyncio.Task[str]) -> None:
        self._minting = None
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._failed_at = self._clock()
            log.warning("minting a Vertex AI token for channel %s failed: %s", self._channel, error)

    async def _mint(self) -> str:
        signer = self._signer
        body = urlencode({"grant_type": GRANT, "assertion": signer.assertion()}).encode()
        head = prepare(
            "POST", signer.token_uri, {"Content-Type": "application/x-www-form-urlencoded"}
        )
        started = self._clock()
        with upstream_errors(self._channel):
            reply = await self._http.send(
                head, body, connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT
            )
            raw = await reply.read(MAX_REPLY_BYTES)
        if reply.status != 200:
            raise UpstreamRefused(
                f"The upstream channel `{self._channel}` could not get an access token "
                f"(status {reply.status}).",
                upstream_status=reply.status,
                retryable=True,
            )
        try:
            found = upstream_json.loads(raw)
        except ValueError:
            found = None
        token = found.get("access_token") if isinstance(found, dict) else None
        lifetime = found.get("expires_in") if isinstance(found, dict) else None
        if not isinstance(token, str) or not token or not isinstance(lifetime, int | float):
            raise UpstreamError(
                f"The upstream channel `{self._channel}` got an unreadable access token reply."
            )
        self._token = token
        self._expires = started + lifetime
        self._refresh_at = started + lifetime - min(REFRESH_MARGIN, lifetime / 2)
        self.mints += 1
        return token
