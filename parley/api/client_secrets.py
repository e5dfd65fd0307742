"""``POST /v1/realtime/client_secrets``: a short-lived ``ek_`` secret for a browser.

The body is OpenAI's: ``expires_after: {anchor: "created_at", seconds}`` (10 to 3600;
``realtime.client_secret_seconds`` when absent) and ``session``, a realtime or
transcription session configuration. A ``session.model`` must be a realtime model the
key may use (404 otherwise, as for any call): the secret then opens sessions of that
model only, and the configuration is sent upstream when a session opens. The request
counts against the key's rpm as any call. The reply is ``{value, expires_at, session}``;
the value is shown once and kept only as its digest (``runtime.client_secrets``).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from parley.api.body import read_json
from parley.api.reply import json_reply
from parley.errors import InvalidRequest
from parley.pipeline.admit import resolve_model, take_request
from parley.pipeline.context import REPLY_HEADERS, SERVICES, caller

KINDS = frozenset({"realtime"})
ENDPOINT = "/v1/realtime/client_secrets"
MOST_SECONDS = 3600
LEAST_SECONDS = 10
SESSION_TYPES = frozenset({"realtime", "transcription"})


async def create_client_secret(request: web.Request) -> web.StreamResponse:
    svc = request.app[SERVICES]
    who = caller(request)
    request[REPLY_HEADERS] = await take_request(svc.limiter, who)
    body = await read_json(request)
    seconds = _seconds(body.get("expires_after"), svc.settings.realtime.client_secret_seconds)
    session = _session(body.get("session"))
    model: str | None = None
    if session is not None and "model" in session:
        named = session["model"]
        if not isinstance(named, str) or not named:
            raise InvalidRequest("`session.model` must be a model name.", param="session.model")
        model = resolve_model(svc.models, who, named, KINDS, ENDPOINT).spec.name
    value, secret = await svc.client_secrets.issue(
        who.key.id, who.group.id, seconds, model=model, session=session
    )
    echoed: dict[str, Any] = {"type": "realtime", **(session or {}), "object": "realtime.session"}
    if model is not None:
        echoed["model"] = model
    expires_at = int(secret.expires_at.timestamp())
    echoed["expires_at"] = expires_at
    return json_reply(
        {"value": value, "expires_at": expires_at, "session": echoed}, request[REPLY_HEADERS]
    )


def _seconds(expires_after: Any, default: int) -> int:
    if expires_after is None:
        return default
    if not isinstance(expires_after, dict):
        raise InvalidRequest("`expires_after` must be an object.", param="expires_after")
    anchor = expires_after.get("anchor", "created_at")
    if anchor != "created_at":
        raise InvalidRequest(
            "`expires_after.anchor` must be 'created_at'.", param="expires_after.anchor"
        )
    seconds = expires_after.get("seconds", default)
    if type(seconds) is not int or not LEAST_SECONDS <= seconds <= MOST_SECONDS:
        raise InvalidRequest(
            f"`expires_after.seconds` must be an integer from {LEAST_SECONDS} to "
            f"{MOST_SECONDS} (a client secret lives at most an hour).",
            param="expires_after.seconds",
        )
    return seconds


def _session(session: Any) -> dict[str, Any] | None:
    if session is None:
        return None
    if not isinstance(session, dict):
        raise InvalidRequest("`session` must be an object.", param="session")
    kind = session.get("type", "realtime")
    if not isinstance(kind, str) or kind not in SESSION_TYPES:
        raise InvalidRequest(
            "`session.type` must be 'realtime' or 'transcription'.", param="session.type"
        )
    return session
