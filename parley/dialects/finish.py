"""Why a reply ended, read from what the caller was sent: the finish reasons a trace
records (``gen_ai.response.finish_reasons``), in the caller's dialect's own words.

Only a traced call is read (``pipeline/runner.py`` asks only when a tracer is on), and
only what was written anyway: a whole reply's body, or each piece of a stream as it
leaves. An OpenAI chat or completion choice says ``finish_reason`` (``stop``,
``length``, ``tool_calls``, ``content_filter``), a Messages reply ``stop_reason``
(``end_turn``, ``max_tokens``, ``tool_use``...), a Responses reply its end state
(``completed``, ``failed``, or the reason it is ``incomplete``: ``max_output_tokens``,
``content_filter``). A JSON ``null`` (every chat chunk before the last) is no reason.
"""

from __future__ import annotations

import re

_REASON = re.compile(
    rb'"(?:finish_reason|stop_reason)"\s*:\s*"([A-Za-z_]{1,40})"'
    rb'|"type"\s*:\s*"response\.(completed|failed)"'
    rb'|"incomplete_details"\s*:\s*\{\s*"reason"\s*:\s*"([A-Za-z_]{1,40})"'
)
MOST = 16
"""The most reasons a call records (one a choice; a reply of many choices is cut here)."""
OVERLAP = 128
"""How much of a stream's previous piece is read again with the next (longer than any
match), so that a reason cut between two upstream reads is still found, once."""


def finish_reasons(data: bytes, found: tuple[str, ...] = (), after: int = 0) -> tuple[str, ...]:
    """``found`` and the finish reasons ``data`` names, in order (at most ``MOST``),
    leaving out those that end within its first ``after`` bytes (read before)."""
    if len(found) >= MOST:
        return found
    reasons = list(found)
    for match in _REASON.finditer(data):
        if match.end() <= after:
            continue
        reason = match.group(1) or match.group(2) or match.group(3)
        reasons.append(reason.decode("ascii"))
        if len(reasons) >= MOST:
            break
    return tuple(reasons)
