"""CORS for ``/v1``, so browser apps (the official SDKs included) can call Parley.

Off unless ``server.cors.allowed_origins`` lists origins (or ``"*"``). When on:

- a preflight (``OPTIONS`` with ``Access-Control-Request-Method``) from an allowed origin
  is answered 204 before authentication (a browser sends no key with it), allowing
  ``Authorization``, ``Content-Type`` and whatever other headers the preflight asks for
  (the SDKs add their own ``x-stainless-*`` headers); from any other origin it is 403;
- every ``/v1`` reply to an allowed origin, errors and streams included, names the origin
  and exposes the request-id, rate-limit and retry headers to the page's script.

Credentials are keys in ``Authorization``, never cookies, so no ``Allow-Credentials``.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler

from parley.api.reply import error_response
from parley.errors import PermissionDenied
from parley.settings import CorsSettings

V1 = ("/v1/", "/v2/rerank")
ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS"
ALWAYS_ALLOWED_HEADERS = ("authorization", "content-type")
EXPOSED_HEADERS = ", ".join(
    (
        "x-request-id",
        "x-ratelimit-limit-requests",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "deprecation",
        "x-parley-model",
        "x-parley-stream",
    )
)


class CorsPolicy:
    def __init__(self, settings: CorsSettings) -> None:
        self._any = "*" in settings.allowed_origins
        self._origins = frozenset(settings.allowed_origins)
        self._max_age = str(settings.max_age_seconds)

    def allows(self, origin: str) -> bool:
        return self._any or origin.rstrip("/") in self._origins

    def preflight(self, request: web.Request, origin: str) -> web.StreamResponse:
        if not self.allows(origin):
            return error_response(
                PermissionDenied(f"The origin {origin} may not call this API from a browser.")
            )
        asked = request.headers.get("Access-Control-Request-Headers", "")
        headers = {name.strip().lower() for name in asked.split(",") if name.strip()}
        allowed = ", ".join(sorted(headers.union(ALWAYS_ALLOWED_HEADERS)))
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Origin": origin,
                "Access-Control-Allow-Methods": ALLOWED_METHODS,
                "Access-Control-Allow-Headers": allowed,
                "Access-Control-Max-Age": self._max_age,
                "Vary": "Origin, Access-Control-Request-Headers",
            },
        )

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if origin is None or not request.path.startswith(V1) or not self.allows(origin):
            return
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
        response.headers.add("Vary", "Origin")


def install(app: web.Application, settings: CorsSettings) -> None:
    """Answer preflights before any route (a middleware: aiohttp runs its chain only for an
    application that has one), and mark replies; nothing when off."""
    if not settings.allowed_origins:
        return
    policy = CorsPolicy(settings)

    @web.middleware
    async def preflight(request: web.Request, handler: Handler) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if (
            request.method == "OPTIONS"
            and origin is not None
            and "Access-Control-Request-Method" in request.headers
            and request.path.startswith(V1)
        ):
            return policy.preflight(request, origin)
        return await handler(request)

    app.middlewares.insert(0, preflight)
    app.on_response_prepare.append(policy.on_prepare)
