"""What a channel's 404 most likely means, said once for everyone who says it.

A channel answers 404 to a chat, completion, embedding, speech or transcription call when
the address Parley builds does not exist there: the channel's base URL lacks the path its
API lives under (most providers' ends in ``/v1``; the Anthropic SDK's address, for one,
leaves it out), or the model's upstream name is not one the engine serves (Azure puts the
deployment in the path; others answer 404 for an unknown model). The channel's test
button (``runtime/channel_probe.py``) adds this to the status it shows, and the log line of
a failed call (``telemetry/upstream.py``) carries it. It names the channel and the
upstream model, never the address itself or a credential.
"""

from __future__ import annotations

NOT_FOUND = 404


def not_found_hint(channel: str, upstream_model: str) -> str:
    """The likely causes of a 404 from ``channel`` to a call of ``upstream_model``."""
    return (
        f"The upstream of channel `{channel}` has no such path or model: check the channel's"
        " base URL (Parley adds the API's own path to it, such as /chat/completions or"
        " /messages; most providers' base URL ends in /v1) and the model's upstream name"
        f" `{upstream_model}`."
    )
