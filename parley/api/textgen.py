"""Chat and classic completions: the request fields they share, and their jobs.

The handlers in ``chat.py`` and ``completions.py`` parse a request into a
``TextRequest``; ``run_text_job`` wraps it in a ``TextReply`` or ``TextStream`` job and hands
it to the runner (``pipeline/runner.py``), which admits, routes, relays and meters it.
The jobs only call the adapter for one route and render what it returned.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from parley.api.body import optional_bool, optional_number, optional_positive_int, stream_options
from parley.api.streaming import DONE, ChunkShaper, StreamTally
from parley.dialects.openai_chat import read_usage, usage_fields
from parley.domain.models import Resolved
from parley.domain.tokens import prompt_ceiling
from parley.domain.usage import Allowance, Usage
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import ParleyError, encode_error_event
from parley.pipeline import runner
from parley.pipeline.admit import scopes_for
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import services
from parley.pipeline.job import NO_HEADERS, Operation
from parley.pipeline.route import Route
from parley.providers.registry import ProviderRegistry
from parley.providers.shapes import Item, ShapedBatches

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
    prompt_ceiling: int
    """The most prompt tokens the request can cost (``domain.tokens.prompt_ceiling``)."""
    choices: int
    """How many replies the upstream writes and bills (``n``, or ``best_of``)."""


def text_request(
    body: dict[str, Any],
    *,
    model: str,
    prompt_estimate: int,
    body_bytes: int,
    images: int = 0,
    length_fields: tuple[str, ...] = ("max_tokens",),
) -> TextRequest:
    """Check the fields chat and classic completions share; ``body_bytes`` is the size of
    the request's JSON body, ``images`` the images it holds (for the prompt's ceiling)."""
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
        prompt_ceiling=max(prompt_estimate, prompt_ceiling(body_bytes, images)),
        choices=max(_choices(body.get("n")), _choices(body.get("best_of"))),
    )


def _choices(value: Any) -> int:
    """A count of replies as the upstream will read it; 1 when it is not one."""
    return value if type(value) is int and value > 1 else 1


CHUNK_OBJECTS = {"chatcmpl-": "chat.completion.chunk"}
"""A stream chunk's ``object`` by endpoint (classic completions stream ``text_completion``),
for a usage chunk made before the upstream sent any chunk."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A text-generating endpoint: what the runner needs, and how to call and render it."""

    operation: Operation
    id_prefix: str
    produced_text: Callable[[JSON], str]
    """The text a reply produced, for estimating usage an upstream did not report."""
    call: Callable[[ProviderRegistry, Route, JSON], Awaitable[JSON]]
    """One whole reply from the adapter behind a route."""
    open: Callable[[ProviderRegistry, Route, JSON], AbstractAsyncContextManager[ShapedBatches]]
    """A stream from the adapter behind a route (asking it for shapes, or not)."""


def run_text_job(
    request: web.Request,
    endpoint: Endpoint,
    text: TextRequest,
    check_model: Callable[[Resolved], None] | None = None,
) -> Awaitable[web.StreamResponse]:
    """Hand the parsed request to the runner, whole or streamed: the runner's coroutine,
    for the handler to await (not a coroutine of its own, which the call's task would go
    through at each of a stream's wake-ups)."""
    svc = services(request)
    default_max_tokens = svc.settings.limits.default_max_tokens
    if text.stream:
        job = TextStream(endpoint, text, svc.providers, default_max_tokens, check_model)
        return runner.stream(request, job)
    whole = TextReply(endpoint, text, svc.providers, default_max_tokens, check_model)
    return runner.reply(request, whole)


class _TextJob:
    """What a whole and a streamed text job share: the model, its checks, the reservation."""

    __slots__ = ("_check", "_default_max_tokens", "_endpoint", "_providers", "_text")

    def __init__(
        self,
        endpoint: Endpoint,
        text: TextRequest,
        providers: ProviderRegistry,
        default_max_tokens: int,
        check_model: Callable[[Resolved], None] | None,
    ) -> None:
        self._endpoint = endpoint
        self._text = text
        self._providers = providers
        self._default_max_tokens = default_max_tokens
        self._check = check_model

    @property
    def operation(self) -> Operation:
        return self._endpoint.operation

    @property
    def model(self) -> str:
        return self._text.model

    def accept(self, model: Resolved) -> None:
        if self._check is not None:
            self._check(model)

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return reservation(self._text, model, caller, self._default_max_tokens)

    def allowance(self, model: Resolved) -> Allowance:
        return allowance(self._text, model, self._default_max_tokens)


class TextReply(_TextJob):
    """A whole chat or classic completion."""

    __slots__ = ()

    def call(self, route: Route) -> Awaitable[JSON]:
        return self._endpoint.call(self._providers, route, self._text.body)

    def usage(self, reply: JSON) -> Usage:
        return reply_usage(reply, self._text.prompt_estimate, self._endpoint.produced_text)

    def render(self, reply: JSON, call: Call, usage: Usage) -> web.StreamResponse:
        reply["model"] = call.model.spec.name
        reply["id"] = _with_prefix(reply.get("id"), self._endpoint.id_prefix)
        reply["usage"] = {**_as_dict(reply.get("usage")), **usage_fields(usage)}
        # The reply headers are added once, by the v1 middleware, from request[REPLY_HEADERS].
        return web.Response(body=orjson.dumps(reply), content_type="application/json")


class TextStream(_TextJob):
    """A streamed chat or classic completion, relayed as Server-Sent Events.

    Parley always asks the upstream for usage (``stream_options.include_usage``) so it
    can meter the stream; the caller sees the usage chunk only when it asked for it, as
    OpenAI does.
    """

    __slots__ = ("_shaper", "_tally")
    content_type = "text/event-stream"
    reply_headers = NO_HEADERS
    _shaper: ChunkShaper

    def __init__(
        self,
        endpoint: Endpoint,
        text: TextRequest,
        providers: ProviderRegistry,
        default_max_tokens: int,
        check_model: Callable[[Resolved], None] | None,
    ) -> None:
        super().__init__(endpoint, text, providers, default_max_tokens, check_model)
        self._tally = StreamTally(text.prompt_estimate)

    def accept(self, model: Resolved) -> None:
        super().accept(model)
        self._shaper = ChunkShaper(
            model.spec.name, self._endpoint.id_prefix, self._text.include_usage
        )

    def open(self, route: Route) -> AbstractAsyncContextManager[ShapedBatches]:
        return self._endpoint.open(self._providers, route, self._text.body)

    def render(self, batch: Sequence[Item]) -> bytes:
        return self._shaper.events(batch, self._tally)

    def end(self) -> bytes:
        """``[DONE]``, after Parley's own usage chunk if the caller asked for usage and the
        upstream sent none (the usage record is marked estimated)."""
        tally = self._tally
        if self._text.include_usage and tally.reported is None:
            chunk_object = CHUNK_OBJECTS.get(self._endpoint.id_prefix, "text_completion")
            return self._shaper.usage_event(tally.usage(), chunk_object) + DONE
        return DONE

    def failure(self, error: ParleyError) -> bytes:
        return encode_error_event(error) + DONE

    def delivered(self) -> Usage | None:
        tally = self._tally
        return tally.usage() if tally.produced else None


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


def allowance(text: TextRequest, model: Resolved, default_max_tokens: int) -> Allowance:
    """The most the call may consume: its prompt's ceiling, and for each reply
    ``max_tokens``, else the model's context window, both within the context window.

    With neither, nothing bounds the output: ``default_max_tokens`` a reply is held
    against the budget and the allowance is open-ended (the bill is not capped there).
    """
    window = model.spec.context_window
    prompt = text.prompt_ceiling if window is None else min(text.prompt_ceiling, window)
    output = text.max_tokens if text.max_tokens is not None else window
    if output is None:
        return Allowance(prompt, default_max_tokens * text.choices, 0, 0, True)
    if window is not None and output > window:
        output = window
    return Allowance(prompt, output * text.choices)


def reply_usage(
    reply: dict[str, Any], prompt_estimate: int, produced: Callable[[JSON], str]
) -> Usage:
    """The upstream's own counts when it gave valid ones (cached tokens included), else
    Parley's estimate, from the text the reply ``produced`` (found only then)."""
    reported = read_usage(reply.get("usage"), source="the upstream")
    if reported is not None:
        return reported
    completion_estimate = (len(produced(reply)) + 3) // 4
    return Usage(
        prompt_tokens=prompt_estimate, completion_tokens=completion_estimate, estimated=True
    )


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _with_prefix(upstream_id: Any, prefix: str) -> str:
    if isinstance(upstream_id, str) and upstream_id.startswith(prefix):
        return upstream_id
    if isinstance(upstream_id, str) and upstream_id:
        return prefix + upstream_id
    return prefix + secrets.token_hex(12)
