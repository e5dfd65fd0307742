"""One structured log line per failed upstream attempt.

It names the channel, the public model and the model's name upstream, the upstream's
status (0 when there was no reply: unreachable, timed out, broken), the error class and
code, the attempt's latency and the call's request id. Never the key, the channel's
address or credentials, the upstream's message or anything of the caller's content.

A 404 to a call whose address Parley builds from the channel's (chat, completions,
embeddings, Messages, speech, transcription) most often means that address or the
model's upstream name is wrong, which a bare ``status=404`` does not say: the line then
carries a ``hint`` saying so (``providers/not_found.py``, the words of the channel's test
button), once per channel every ``HINT_EVERY_SECONDS``, so a flood of such calls does
not flood the log with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from parley.errors import UpstreamError, UpstreamRefused
from parley.pipeline.call import Call
from parley.pipeline.route import Route
from parley.providers.not_found import NOT_FOUND, not_found_hint
from parley.telemetry.logs import FIELDS

log = logging.getLogger("parley.upstream")
NO_REPLY = 0
HINT_EVERY_SECONDS = 300.0
"""How long a channel's 404 hint waits before it is given again."""
ADDRESSED_ENDPOINTS = frozenset(
    {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/images/generations",
        "/v1/images/edits",
        "/v1/messages",
        "/v1/audio/speech",
        "/v1/audio/transcriptions",
        "/v1/audio/translations",
    }
)
"""The calls whose 404 is about the address: not a stored response or a voice, which
may be missing upstream for the caller's own reasons."""


def upstream_status(error: UpstreamError) -> int:
    return error.upstream_status if isinstance(error, UpstreamRefused) else NO_REPLY


class UpstreamFailureLog:
    """The watcher of failed attempts (``CallWatchers.upstream_failed``) that logs them;
    it remembers when it last gave each channel's 404 hint."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._hinted: dict[str, float] = {}
        """Channel → when its 404 hint was last given (the configured channels, at most)."""

    def __call__(self, call: Call, route: Route, error: UpstreamError, seconds: float) -> None:
        status = upstream_status(error)
        fields: dict[str, Any] = {
            "channel": route.target.channel,
            "model": call.model.spec.name,
            "upstream_model": route.target.model,
            "status": status,
            "error": type(error).__name__,
            "code": error.code,
            "latency_ms": round(seconds * 1000, 1),
            "request_id": call.request_id,
        }
        if status == NOT_FOUND and call.endpoint in ADDRESSED_ENDPOINTS:
            hint = self._hint(route)
            if hint is not None:
                fields["hint"] = hint
        log.warning("upstream call failed", extra={FIELDS: fields})

    def _hint(self, route: Route) -> str | None:
        """The 404 hint for ``route``'s channel, unless it was given too recently."""
        channel, now = route.target.channel, self._clock()
        last = self._hinted.get(channel)
        if last is not None and now - last < HINT_EVERY_SECONDS:
            return None
        self._hinted[channel] = now
        return not_found_hint(channel, route.target.model)
