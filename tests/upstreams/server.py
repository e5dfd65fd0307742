"""What every fake engine shares: a real aiohttp server on 127.0.0.1 and its plumbing.

A fake subclasses ``FakeServer`` (a dataclass) and builds its routes in ``application()``::

    @dataclass
    class FakeThing(FakeServer):
        def application(self) -> web.Application:
            app = web.Application()
            app.router.add_post("/v1/thing", self._thing)
            return app

    async with FakeThing() as engine:     # or await engine.start() / await engine.stop()
        engine.base_url                    # "http://127.0.0.1:<free port>/v1"

``FakeThing(port=N)`` listens on N instead of a free port. ``Running`` is the ``async with``
part alone (``start()`` on entry, ``stop()`` on exit), for servers that are not aiohttp's.
The helpers below are the wire pieces more than one fake writes: the record of a request,
the Bearer-key check, a JSON reply, OpenAI's error envelope, an SSE ``data:`` event, and
the words and last user text of a Messages-shaped body (the Anthropic, Bedrock and Azure
fakes echo and count them). ``FakeServer`` keeps the requests a fake received.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import orjson
from aiohttp import web
from multidict import CIMultiDict

JSON = dict[str, Any]


class Running:
    """An async context manager over ``start()`` and ``stop()``."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


@dataclass
class FakeServer(Running):
    """An aiohttp application served on 127.0.0.1 while the fake runs."""

    handler_cancellation: ClassVar[bool] = False
    """Cancel a handler whose client went away (aiohttp's ``handler_cancellation``)."""

    port: int = field(default=0, kw_only=True)
    requests: list[ReceivedRequest] = field(default_factory=list, kw_only=True)
    """What the fake received, in order (each fake records the requests it serves)."""
    base_url: str = field(default="", init=False)
    _runner: web.AppRunner | None = field(default=None, init=False, repr=False)

    @property
    def last_request(self) -> ReceivedRequest:
        return self.requests[-1]

    @property
    def endpoint(self) -> str:
        """The base URL without ``/v1``, for the providers whose paths start at the root."""
        return self.base_url.removesuffix("/v1")

    def application(self) -> web.Application:
        raise NotImplementedError

    async def start(self) -> None:
        self._runner = web.AppRunner(
            self.application(),
            access_log=None,
            handler_cancellation=self.handler_cancellation,
            shutdown_timeout=0.2,
        )
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    method: str
    path: str
    headers: CIMultiDict[str]
    body: Any

    @property
    def authorization(self) -> str | None:
        return self.headers.get("Authorization")


def received(request: web.Request, body: Any) -> ReceivedRequest:
    """The record of ``request``, with its body as the fake read it."""
    return ReceivedRequest(request.method, request.path, CIMultiDict(request.headers), body)


def authorized(request: web.Request, api_key: str | None) -> bool:
    """Whether the request may pass: no key asked for, or ``Authorization: Bearer <key>``."""
    return api_key is None or request.headers.get("Authorization") == f"Bearer {api_key}"


def json_reply(status: int, payload: object) -> web.Response:
    """``payload`` as compact JSON, ``Content-Type: application/json`` (no charset)."""
    return web.Response(status=status, body=orjson.dumps(payload), content_type="application/json")


def openai_error(
    message: str, kind: str, *, param: str | None = None, code: str | int | None = None
) -> JSON:
    """OpenAI's error envelope: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def sse_data(payload: object) -> bytes:
    """One SSE event of a ``data:`` line holding ``payload`` as JSON."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def input_words(body: JSON, texts: Callable[[Any], list[str]]) -> int:
    """The words of a Messages-shaped body's ``system`` and every message's content, as
    the fake counts input tokens; ``texts`` reads a content of the fake's dialect."""
    found = texts(body.get("system"))
    for message in body.get("messages") or ():
        found.extend(texts(message.get("content")))
    return sum(len(text.split()) for text in found)


def last_user_text(body: JSON, texts: Callable[[Any], list[str]]) -> str:
    """The text of the body's last ``user`` message, which the fakes echo back."""
    for message in reversed(body.get("messages") or ()):
        if message.get("role") == "user":
            return " ".join(texts(message.get("content")))
    return ""
