"""What chat and classic completions share: admit, route, relay, meter, reply."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from parley.api.body import optional_bool, optional_number, optional_positive_int, stream_options
from parley.api.context import REPLY_HEADERS, caller, services
from parley.api.streaming import stream_reply
from parley.domain.models import Resolved
from parley.domain.usage import Usage
from parley.domain.value import value
from parley.errors import ParleyError, ServiceUnavailable
from parley.pipeline.admit import admit, resolve_model, scopes_for
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.relay import Operation, relay
from parley.pipeline.route import Route
from parley.services import Services

CLIENT_CLOSED = 499
DEFAULT_SHARE_OF_TPM = 10


@value
class TextRequest:
    """A validated chat or completion request."""

    model: str
    body: dict[str, Any]
    stream: bool
    include_usage: bool
    max_tokens: int | None
    prompt_estimate: int


def text_request(
    body: dict[str, Any],
    *,
    model: str,
    prompt_estimate: int,
    length_fields: tuple[str, ...] = ("max_tokens",),
) -> TextRequest:
    """Check the fields chat and classic completions share."""
    stream = optional_bool(body, "stream")
    include_usage = stream_options(body, stream)
    lengths = [optional_positive_int(body, name) for name in length_fields]
    optional_number(body, "temperature", 0.0, 2.0)
    optional_number(body, "top_p", 0.0, 1.0)
    return TextRequest(
        model=model,
        body=body,
        stream=stream,
        include_usage=include_usage,
        max_tokens=next((length for length in lengths if length is not None), None),
        prompt_estimate=prompt_estimate,
    )


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    path: str
    operation: Operation
    kinds: Collection[str]
    id_prefix: str
    produced_text: Callable[[dict[str, Any]], str]
    """The text a reply produced, for estimating usage an upstream did not report."""


async def generate(
    request: web.Request,
    endpoint: Endpoint,
    text: TextRequest,
    check_model: Callable[[Resolved], None] | None = None,
) -> web.StreamResponse:
    svc = services(request)
    who = caller(request)
    resolved = resolve_model(svc.models, who.group, text.model, endpoint.kinds, endpoint.name)
    if check_model is not None:
        check_model(resolved)
    if svc.meter.writer.overloaded:
        raise ServiceUnavailable("The gateway is catching up on usage records; retry shortly.")
    reserve = reservation(text, resolved, who, svc.settings.limits.default_max_tokens)
    admission = await admit(svc.limiter, svc.meter.ledger, who, reserve)
    call = Call(svc.request_ids.new(), endpoint.path, who, resolved, admission)
    request[REPLY_HEADERS] = call.reply_headers()
    routes = svc.router.routes(resolved.spec.name)
    body = {**text.body, "model": resolved.spec.name}
    if text.stream:
        return await stream_reply(
            request,
            svc,
            call,
            routes=routes,
            operation=endpoint.operation,
            body=body,
            include_usage=text.include_usage,
            id_prefix=endpoint.id_prefix,
            prompt_estimate=text.prompt_estimate,
        )
    return await _plain_reply(
        svc, call, routes=routes, endpoint=endpoint, body=body, prompt_estimate=text.prompt_estimate
    )


async def _plain_reply(
    svc: Services,
    call: Call,
    *,
    routes: Sequence[Route],
    endpoint: Endpoint,
    body: dict[str, Any],
    prompt_estimate: int,
) -> web.Response:
    try:
        reply, route = await relay(svc.providers, routes, endpoint.operation, body)
    except ParleyError as error:
        svc.meter.finish(call, usage=Usage(), status=error.status, channel=error.channel)
        raise
    except asyncio.CancelledError:
        svc.meter.finish(call, usage=Usage(), status=CLIENT_CLOSED, channel="")
        raise
    usage = reply_usage(reply, prompt_estimate, endpoint.produced_text(reply))
    reply["model"] = call.model.spec.name
    reply["id"] = _with_prefix(reply.get("id"), endpoint.id_prefix)
    reply["usage"] = {**_as_dict(reply.get("usage")), **usage_fields(usage)}
    svc.meter.finish(call, usage=usage, status=200, channel=route.target.channel)
    # The reply headers are added once, by the v1 middleware, from request[REPLY_HEADERS].
    return web.Response(body=orjson.dumps(reply), content_type="application/json")


def reservation(text: TextRequest, model: Resolved, who: Caller, default_max_tokens: int) -> int:
    """Tokens to reserve: the prompt estimate plus what the reply may use.

    An explicit ``max_tokens`` is reserved in full (a request that can never fit is
    refused as too large). Without one, the reply's share is ``default_max_tokens``,
    capped by the context window and by a tenth of the tightest tokens-per-minute
    limit, so a small quota still admits several calls at once; the settlement after
    the call corrects the bucket by the real count.
    """
    if text.max_tokens is not None:
        return text.prompt_estimate + text.max_tokens
    share = default_max_tokens
    if model.spec.context_window is not None:
        share = min(share, max(0, model.spec.context_window - text.prompt_estimate))
    limits = [scope.quota.tpm for scope in scopes_for(who) if scope.quota.tpm is not None]
    if limits:
        share = min(share, max(1, min(limits) // DEFAULT_SHARE_OF_TPM))
    return text.prompt_estimate + share


def reply_usage(reply: dict[str, Any], prompt_estimate: int, produced: str) -> Usage:
    """The upstream's own counts when it gave them, else Parley's estimate."""
    usage = reply.get("usage")
    if isinstance(usage, dict):
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and isinstance(completion, int):
            return Usage(prompt_tokens=prompt, completion_tokens=completion)
    completion_estimate = (len(produced) + 3) // 4
    return Usage(
        prompt_tokens=prompt_estimate, completion_tokens=completion_estimate, estimated=True
    )


def usage_fields(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _with_prefix(upstream_id: Any, prefix: str) -> str:
    if isinstance(upstream_id, str) and upstream_id.startswith(prefix):
        return upstream_id
    if isinstance(upstream_id, str) and upstream_id:
        return prefix + upstream_id
    return prefix + secrets.token_hex(12)
