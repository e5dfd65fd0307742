"""An Anthropic stream's ``error`` event as ``UpstreamRejected`` or ``UpstreamRefused``.

An ``invalid_request_error`` (or another 4xx type) is the request's fault: its message
is relayed, redacted, as for an error status. Anything else (``overloaded_error``,
``api_error``) is the upstream's: a 502 naming only the channel, which may be retried
on another channel (an overloaded upstream fails over like a 503).
"""

from __future__ import annotations

from parley.domain.wire import JSON
from parley.errors import UpstreamRefused
from parley.providers.openai.refusal import rejected

REQUEST_FAULTS = {
    "invalid_request_error": 400,
    "request_too_large": 413,
}
RETRYABLE = {"overloaded_error": 529, "rate_limit_error": 429, "api_error": 500}


def stream_failure(channel: str, event: JSON, secret: str | None) -> UpstreamRefused:
    details = event.get("error")
    kind = details.get("type") if isinstance(details, dict) else None
    status = REQUEST_FAULTS.get(kind) if isinstance(kind, str) else None
    if status is not None:
        return rejected(status, event, secret)
    upstream_status = RETRYABLE.get(kind, 502) if isinstance(kind, str) else 502
    return UpstreamRefused(
        f"The upstream channel `{channel}` failed during the stream ({kind or 'error'}).",
        upstream_status=upstream_status,
        retryable=True,
    )
