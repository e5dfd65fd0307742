"""What an ``api/`` module hands the runner: one call of one operation, as a ``Job``.

An endpoint is an ``Operation`` (built once: its name, the path its usage records carry,
the model kinds it accepts). Each request becomes a job object the endpoint's module
builds from the parsed request. The runner (``pipeline/runner.py``) asks the job, in
this order:

1. ``accept(model)``: the model the caller named, resolved and allowed; refuse it by
   raising a ``ParleyError``, or keep what the call or the reply will need.
2. ``reservation(model, caller)``: the tokens to reserve against the rate limits
   (0 for operations not counted in tokens: speech, transcription, voices), and
   ``allowance(model)``: the most the call may consume, held against the group's budget
   until the call ends and the cap on what it is billed.
3. Then, for a ``ReplyJob`` (one reply, rendered whole):
   ``call(route)`` on each route until one answers, ``usage(reply)``, and
   ``render(reply, call, usage)`` → the HTTP response.
   For a ``StreamJob`` (relayed as the upstream produces it), unless it names a
   ``whole`` job to answer instead (then that one, as above):
   ``open(route)`` on each route until one starts, ``render(batch)`` → the bytes each
   batch becomes, ``end()`` → the bytes that close a complete stream,
   ``failure(error)`` → the bytes that tell the caller a started stream failed, and
   ``delivered()`` → the usage of what was relayed so far (``None`` when nothing
   billable was), which the runner meters however the stream ended.

Jobs translate and render; they never meter, admit or fall over. Those are the runner's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from aiohttp import web

from parley.domain.models import Resolved
from parley.domain.usage import Allowance, Usage
from parley.errors import ParleyError
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.route import Route

NO_HEADERS: Mapping[str, str] = MappingProxyType({})
"""``StreamJob.reply_headers`` of a job that adds none."""

R = TypeVar("R")
"""A whole upstream reply, as the adapter returns it (a JSON dict, audio bytes...)."""
B = TypeVar("B")
"""One item of a streamed reply (a chunk dict, a piece of audio...)."""

Batches = AsyncIterator[Sequence[B]]
"""A stream's items grouped as they arrived: one non-empty batch per upstream read."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One ``/v1`` endpoint, as the runner sees it. Build it once, at import."""

    name: str
    """What it does, for error messages: "chat completions", "speech"."""
    path: str
    """The endpoint its usage records name: "/v1/chat/completions"."""
    kinds: Collection[str]
    """The model kinds it accepts; another kind is a 400 ``model_not_supported``."""


class Job(Protocol):
    """What every job tells the runner before anything is called."""

    @property
    def operation(self) -> Operation: ...

    @property
    def model(self) -> str:
        """The model name (or alias) the caller asked for."""

    def accept(self, model: Resolved) -> None:
        """Refuse the resolved model (raise a ``ParleyError``) or remember it."""

    def reservation(self, model: Resolved, caller: Caller) -> int:
        """Tokens to reserve before the call; the meter settles the difference after."""

    def allowance(self, model: Resolved) -> Allowance:
        """The most the call may consume, from what the request allows (its input, its
        ``max_tokens`` or the model's context window): its worst case is held against
        the group's budget from admission to the end, and its usage is capped there.
        The runner asks once, at admission (a fallback model is accepted later under
        the same allowance): a stream job that writes usage into its reply keeps what it
        returned, so the reply says what is billed."""


class ReplyJob(Job, Protocol[R]):
    """A call answered with one whole reply."""

    def call(self, route: Route) -> Awaitable[R]:
        """Call the upstream behind ``route`` (through its adapter) for the whole reply."""

    def usage(self, reply: R) -> Usage:
        """What the reply consumed (the upstream's count, or Parley's measure)."""

    def render(self, reply: R, call: Call, usage: Usage) -> web.StreamResponse:
        """The caller's response (not prepared: the edge adds the reply headers)."""


class StreamJob(Job, Protocol[B]):
    """A call whose reply is relayed to the caller as the upstream produces it."""

    @property
    def content_type(self) -> str:
        """The reply's content type: ``text/event-stream``, ``audio/wav``..."""

    @property
    def reply_headers(self) -> Mapping[str, str]:
        """Headers known once the upstream answered (a speech reply's sample rate), added
        to the reply before it starts; usually none."""

    @property
    def whole(self) -> ReplyJob[Any] | None:
        """The job that answers with one whole reply instead, when ``accept`` found that
        the model cannot stream what was asked (a transcription model that does not
        stream); ``None`` for nearly every job."""

    def open(self, route: Route) -> AbstractAsyncContextManager[Batches[B]]:
        """Open the upstream's stream behind ``route`` (through its adapter)."""

    def render(self, batch: Sequence[B]) -> bytes:
        """Count ``batch`` and return the bytes it becomes (may be empty). Runs once per
        upstream read: keep it lean."""

    def end(self) -> bytes:
        """The bytes after the last batch of a complete stream (``data: [DONE]``...)."""

    def failure(self, error: ParleyError) -> bytes | None:
        """The bytes that tell the caller the started stream failed (an SSE error event
        and ``[DONE]``), or ``None`` when the format cannot say it (raw audio): the runner
        then cuts the connection, so the caller sees a truncated body, not a short one."""

    def delivered(self) -> Usage | None:
        """The usage of what was relayed so far; ``None`` if nothing billable was."""
