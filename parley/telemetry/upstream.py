"""One structured log line per failed upstream attempt.

It names the channel, the public model, the upstream's status (0 when there was no
reply: unreachable, timed out, broken), the error class and code, the attempt's latency
and the call's request id. Never the key, the channel's address or credentials, the
upstream's message or anything of the caller's content.
"""

from __future__ import annotations

import logging

from parley.errors import UpstreamError, UpstreamRefused
from parley.pipeline.call import Call
from parley.telemetry.logs import FIELDS

log = logging.getLogger("parley.upstream")
NO_REPLY = 0


def upstream_status(error: UpstreamError) -> int:
    return error.upstream_status if isinstance(error, UpstreamRefused) else NO_REPLY


def log_upstream_failure(call: Call, channel: str, error: UpstreamError, seconds: float) -> None:
    log.warning(
        "upstream call failed",
        extra={
            FIELDS: {
                "channel": channel,
                "model": call.model.spec.name,
                "status": upstream_status(error),
                "error": type(error).__name__,
                "code": error.code,
                "latency_ms": round(seconds * 1000, 1),
                "request_id": call.request_id,
            }
        },
    )
