"""Bounds on request bodies that arrive slowly: a deadline each, and a number per key.

Valid headers, a key, ``Content-Length: 100000`` and then one byte a second would
otherwise hold a connection (and a handler) for good. So:

* **A deadline**: from the moment the app takes a request, its body has
  ``server.body_timeout_seconds`` to arrive whole. Past it the body stream fails with
  ``BodyTimeout``: a handler reading it answers 408 (and the connection closes); a
  reply already sent means aiohttp's drain of the unread body stops and closes.
* **A number per key**: a key may have ``server.pending_bodies_per_key`` requests whose
  bodies are still arriving (bodies that were whole when the request reached the app,
  nearly all of them, take no slot). One more is refused with 429 at once, before its
  body is read, and the connection closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web
from aiohttp.streams import StreamReader

from parley.errors import RateLimited


class BodyTimeout(asyncio.TimeoutError):
    """The request body did not arrive within its deadline.

    A ``TimeoutError`` so that aiohttp's drain of an unread body after the reply treats
    it as the end of the drain (and closes), not as a failure to log.
    """


def start_body_clock(body: StreamReader, seconds: float) -> None:
    """Fail ``body`` with ``BodyTimeout`` if it is not whole within ``seconds``."""
    if body.is_eof():
        return
    loop = asyncio.get_running_loop()
    timer = loop.call_later(seconds, _expire, body, seconds)
    body.on_eof(timer.cancel)


def _expire(body: StreamReader, seconds: float) -> None:
    if not body.is_eof() and body.exception() is None:
        body.set_exception(BodyTimeout(f"the request body did not arrive within {seconds:g}s"))


class PendingBodies:
    """How many requests of each key have a body still arriving, within a limit."""

    def __init__(self, per_key: int) -> None:
        self.per_key = per_key
        self._counts: dict[int, int] = {}

    def pending(self, key_id: int) -> int:
        return self._counts.get(key_id, 0)

    @contextmanager
    def hold(self, key_id: int, body: StreamReader) -> Iterator[None]:
        """A slot while ``body`` arrives (none if it is whole); 429 if the key has none left."""
        if body.is_eof() or body.exception() is not None:
            yield
            return
        held = self._counts.get(key_id, 0)
        if held >= self.per_key:
            raise RateLimited(
                f"This key already has {self.per_key} requests whose bodies are still "
                "arriving; finish or cancel one first.",
                kind="requests",
                headers={"retry-after": "1"},
            )
        self._counts[key_id] = held + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                left = self._counts[key_id] - 1
                if left:
                    self._counts[key_id] = left
                else:
                    del self._counts[key_id]

        body.on_eof(release)
        try:
            yield
        finally:
            release()


PENDING_BODIES = web.AppKey("pending_bodies", PendingBodies)
BODY_SECONDS = web.AppKey("body_timeout_seconds", float)


def install(app: web.Application, body_timeout_seconds: float, pending_per_key: int) -> None:
    """Give ``app`` what the edge's body bounds need."""
    app[BODY_SECONDS] = body_timeout_seconds
    app[PENDING_BODIES] = PendingBodies(pending_per_key)
