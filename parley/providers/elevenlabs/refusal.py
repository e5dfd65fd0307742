"""ElevenLabs' error answers, as Parley's refusals.

ElevenLabs writes ``{"detail": {"status": "voice_not_found", "message": "..."}}`` (its
``status`` is a name, e.g. ``invalid_api_key``, ``quota_exceeded``,
``too_many_concurrent_requests``, ``system_busy``), and FastAPI's validation list
``{"detail": [{"loc", "msg", "type"}]}`` for a body it cannot read (422). The first is
read into OpenAI's envelope with ``status`` as the ``code``; the second as every engine's
(``audio_replies.engine_refusal``). A 429's ``Retry-After`` feeds the breaker.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from parley.errors import UpstreamRefused
from parley.providers.audio_replies import engine_refusal
from parley.providers.base import Target

GONE = frozenset({"voice_not_found", "voice_does_not_exist"})


def elevenlabs_refusal(
    target: Target, status: int, raw: bytes, headers: Mapping[bytes, bytes]
) -> UpstreamRefused:
    return engine_refusal(target.channel, status, envelope(raw), target.api_key, headers)


def envelope(raw: bytes) -> bytes:
    """OpenAI's envelope for ElevenLabs' ``{"detail": {"status", "message"}}``; any
    other body as it came."""
    detail = _detail(raw)
    if not isinstance(detail, dict) or not isinstance(detail.get("message"), str):
        return raw
    error: dict[str, object] = {"message": detail["message"]}
    if isinstance(detail.get("status"), str):
        error["code"] = detail["status"]
    return orjson.dumps({"error": error})


def says_voice_is_gone(raw: bytes) -> bool:
    """Whether an error answer says the voice does not exist (any more)."""
    detail = _detail(raw)
    return isinstance(detail, dict) and detail.get("status") in GONE


def _detail(raw: bytes) -> object:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return body.get("detail") if isinstance(body, dict) else None
