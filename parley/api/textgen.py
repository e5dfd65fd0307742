"""Chat and classic completions: the request fields they share, and their jobs' bases.

The handlers in ``chat.py`` and ``completions.py`` parse a request into a
``TextRequest`` and hand one of their jobs (``TextReply`` or ``TextStream`` subclasses,
which call their adapter for one route) to the runner (``pipeline/runner.py``), which
admits, routes, relays and meters it.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import orjson
from aiohttp import web

from parley.api.body import optional_bool, optional_positive_int, sampling, stream_options
from parley.dialects.openai_chat_reply import read_usage, usage_fields
from parley.dialects.openai_relay import DONE, OpenAIRelay
from parley.domain.models import Resolved
from parley.domain.tokens import prompt_ceiling
from parley.domain.usage import UNBOUNDED, Allowance, Usage, with_estimate
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import ParleyError, encode_error_event
from parley.pipeline.admit import scopes_for
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.job import NO_HEADERS, Operation
from parley.pipeline.route import Route
from parley.pipeline.services import Services
from parley.providers.base import Translations

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
    max_tokens = None
    for name in length_fields:  # each is checked; the first one given counts
        length = optional_positive_int(body, name)
        if max_tokens is None:
            max_tokens = length
    sampling(body)
    return TextRequest(
        model,
        body,
        stream,
        include_usage,
        max_tokens,
        prompt_estimate,
        max(prompt_estimate, prompt_ceiling(body_bytes, images)),  # prompt_ceiling
        max(_choices(body.get("n")), _choices(body.get("best_of"))),  # choices
    )


def _choices(value: Any) -> int:
    """A count of replies as the upstream will read it; 1 when it is not one."""
    return value if type(value) is int and value > 1 else 1


class TextJob:
    """What every chat and completions job shares: the model, its checks, the
    reservation and the allowance. A subclass names its ``operation`` and ``id_prefix``
    and may check the resolved model (``check``)."""

    __slots__ = ("_allowed", "_providers", "_settings", "_text")
    operation: ClassVar[Operation]
    id_prefix: ClassVar[str]
    """The prefix of the ids the caller sees (``chatcmpl-``, ``cmpl-``)."""

    def __init__(self, text: TextRequest, svc: Services) -> None:
        self._text = text
        self._providers = svc.providers
        self._settings = svc.settings
        self._allowed = UNBOUNDED
        """The allowance the runner asked for at admission (``allowance``): a stream's
        usage chunk says what is billed, capped there."""

    @property
    def model(self) -> str:
        return self._text.model

    def accept(self, model: Resolved) -> None:
        self.check(model)

    def check(self, model: Resolved) -> None:
        """Refuse what the resolved model cannot take (raise a ``ParleyError``)."""

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return reservation(self._text, model, caller, self._settings.limits.default_max_tokens)

    def allowance(self, model: Resolved) -> Allowance:
        allowed = self._allowed = allowance(
            self._text, model, self._settings.limits.default_max_tokens
        )
        return allowed


class TextReply(TextJob, ABC):
    """A whole chat or classic completion: a subclass calls its adapter (``call``) and
    says what text a reply produced (``produced``)."""

    __slots__ = ()

    @abstractmethod
    def call(self, route: Route) -> Awaitable[JSON]: ...

    @abstractmethod
    def produced(self, reply: JSON) -> str:
        """The text a reply produced, for estimating usage an upstream did not report."""

    def usage(self, reply: JSON) -> Usage:
        return reply_usage(reply, self._text.prompt_estimate, self.produced)

    def render(self, reply: JSON, call: Call, usage: Usage) -> web.StreamResponse:
        reply["model"] = call.model.spec.name
        reply["id"] = _with_prefix(reply.get("id"), self.id_prefix)
        reply["usage"] = {**_as_dict(reply.get("usage")), **usage_fields(usage)}
        # The reply headers are added once, by the edge, from request[REPLY_HEADERS].
        return web.Response(body=orjson.dumps(reply), content_type="application/json")


class TextStream(TextJob, ABC):
    """A streamed chat or classic completion, relayed as Server-Sent Events by an
    ``OpenAIRelay`` (``dialects/openai_relay.py``) that the subclass's ``open`` hands its
    adapter.

    Parley always asks the upstream for usage (``stream_options.include_usage``) so it
    can meter the stream; the caller sees the usage chunk only when it asked for it, as
    OpenAI does.
    """

    __slots__ = ("_model_name", "_relay")
    content_type = "text/event-stream"
    reply_headers = NO_HEADERS
    whole = None
    chunk_object: ClassVar[str]
    """The ``object`` of the stream's chunks (``chat.completion.chunk``...)."""
    shapes: ClassVar[bool] = False
    """Whether reads are relayed by their learned shape (chat)."""

    def __init__(self, text: TextRequest, svc: Services) -> None:
        TextJob.__init__(self, text, svc)
        self._model_name = ""
        self._relay: OpenAIRelay | None = None

    def accept(self, model: Resolved) -> None:
        self.check(model)
        self._model_name = model.spec.name

    @abstractmethod
    def open(self, route: Route) -> Translations[bytes]: ...

    def relay(self) -> OpenAIRelay:
        """A new relay for one route's stream (the one that starts is kept)."""
        text = self._text
        relay = self._relay = OpenAIRelay(
            self._model_name,
            self.id_prefix,
            self.chunk_object,
            include_usage=text.include_usage,
            prompt_estimate=text.prompt_estimate,
            allowance=self._allowed,
            max_event_bytes=self._settings.upstream.max_event_bytes,
            shapes=self.shapes,
        )
        return relay

    def render(self, batch: Sequence[bytes]) -> bytes:
        return batch[0] if len(batch) == 1 else b"".join(batch)

    def end(self) -> bytes:
        """``[DONE]``, after Parley's own usage chunk if the caller asked for usage and the
        upstream sent none."""
        relay = self._relay
        return relay.closing() if relay is not None else DONE

    def failure(self, error: ParleyError) -> bytes:
        return encode_error_event(error) + DONE

    def delivered(self) -> Usage | None:
        relay = self._relay
        return relay.delivered() if relay is not None else None


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
    """The upstream's own counts when it gave valid ones (cached tokens included), with
    Parley's estimate from the text the reply ``produced`` (billed instead of a report
    past the call's allowance); else that estimate."""
    reported = read_usage(reply.get("usage"), source="the upstream")
    completion_estimate = (len(produced(reply)) + 3) // 4
    return with_estimate(
        reported,
        Usage(prompt_tokens=prompt_estimate, completion_tokens=completion_estimate, estimated=True),
    )


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _with_prefix(upstream_id: Any, prefix: str) -> str:
    if isinstance(upstream_id, str) and upstream_id.startswith(prefix):
        return upstream_id
    if isinstance(upstream_id, str) and upstream_id:
        return prefix + upstream_id
    return prefix + secrets.token_hex(12)
