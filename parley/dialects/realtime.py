"""OpenAI's Realtime protocol (GA), as a relay needs it: sans-IO, frames in, frames out.

A realtime session is a WebSocket of JSON events (``docs/realtime.md``). A relay reads
every client event (``read_client_event``) to refuse what it may not forward (not JSON,
an unknown type, an audio chunk past its bound) with an ``error`` event naming it, and to
rewrite the model the caller names into the upstream's; it reads every server event's
type (``server_event``) to count what a response delivered (``Delivered``) and to meter
each ``response.done`` from its usage (``turn_usage``). Nothing here touches a socket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from parley.domain.usage import Usage, reported_counts

CLIENT_EVENTS = frozenset(
    {
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "output_audio_buffer.clear",
        "conversation.item.create",
        "conversation.item.retrieve",
        "conversation.item.truncate",
        "conversation.item.delete",
        "response.create",
        "response.cancel",
    }
)
"""The client events of the GA protocol (``RealtimeClientEvent``); nothing else is sent on."""

APPEND = "input_audio_buffer.append"
RESPONSE_CREATE = "response.create"
SESSION_UPDATE = "session.update"
ITEM_CREATE = "conversation.item.create"

AUDIO_DELTAS = frozenset({"response.output_audio.delta", "response.audio.delta"})
TEXT_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.output_audio_transcript.delta",
        "response.function_call_arguments.delta",
        "response.text.delta",
        "response.audio_transcript.delta",
    }
)
"""Deltas of output tokens that are text: what a cut response delivered besides audio."""

PCM_BYTES_PER_SECOND = 48_000
"""``audio/pcm`` (16-bit mono at 24 kHz), the only PCM rate the protocol has."""
G711_BYTES_PER_SECOND = 8_000
"""``audio/pcmu`` and ``audio/pcma`` (8-bit at 8 kHz)."""
INPUT_AUDIO_TOKENS_PER_SECOND = 10
"""How OpenAI counts input audio in tokens, used for an estimate only: a turn the
upstream reports usage for is billed by its report."""
OUTPUT_AUDIO_TOKENS_PER_SECOND = 20
"""How OpenAI counts output audio in tokens, used for an estimate only."""
CHARACTERS_PER_TOKEN = 4


class BadEvent(Exception):
    """A client event that is not sent on: answered with an ``error`` event naming it."""

    def __init__(
        self, message: str, *, code: str, param: str | None = None, event_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param
        self.event_id = event_id


@dataclass(slots=True)
class ClientEvent:
    """One client event, parsed: its type, body (the whole event) and ``event_id``."""

    type: str
    body: dict[str, Any]
    event_id: str | None

    def encoded(self) -> str:
        return orjson.dumps(self.body).decode()


def read_client_event(frame: str | bytes, max_audio_bytes: int) -> ClientEvent:
    """The client event in ``frame``; raises ``BadEvent`` for one not to forward."""
    try:
        body = orjson.loads(frame)
    except orjson.JSONDecodeError:
        raise BadEvent(
            "The event is not valid JSON: send each event as one JSON object.",
            code="invalid_json",
        ) from None
    if not isinstance(body, dict):
        raise BadEvent("The event must be a JSON object.", code="invalid_event")
    event_id = body.get("event_id")
    if event_id is not None and not isinstance(event_id, str):
        raise BadEvent("`event_id` must be a string.", code="invalid_event", param="event_id")
    kind = body.get("type")
    if not isinstance(kind, str):
        raise BadEvent(
            "The event has no `type`.", code="invalid_event", param="type", event_id=event_id
        )
    if kind not in CLIENT_EVENTS:
        raise BadEvent(
            f"Unknown event type '{kind[:100]}': a client event is one of "
            f"{', '.join(sorted(CLIENT_EVENTS))}.",
            code="unknown_event",
            param="type",
            event_id=event_id,
        )
    _check_fields(kind, body, event_id, max_audio_bytes)
    return ClientEvent(kind, body, event_id)


def _check_fields(kind: str, body: dict[str, Any], event_id: str | None, max_audio: int) -> None:
    """The fields a relay reads (or bounds) have the types the protocol gives them."""
    if kind == APPEND:
        audio = body.get("audio")
        if not isinstance(audio, str):
            raise BadEvent(
                "`audio` must be a base64 string.",
                code="invalid_value",
                param="audio",
                event_id=event_id,
            )
        if len(audio) // 4 * 3 > max_audio:
            raise BadEvent(
                f"The audio chunk is too large: at most {max_audio} bytes per "
                "input_audio_buffer.append; send the audio in smaller chunks.",
                code="audio_chunk_too_large",
                param="audio",
                event_id=event_id,
            )
    elif kind == SESSION_UPDATE and not isinstance(body.get("session"), dict):
        raise BadEvent(
            "`session` must be an object.",
            code="invalid_value",
            param="session",
            event_id=event_id,
        )
    elif kind == RESPONSE_CREATE:
        response = body.get("response")
        if response is not None and not isinstance(response, dict):
            raise BadEvent(
                "`response` must be an object.",
                code="invalid_value",
                param="response",
                event_id=event_id,
            )
        limit = (response or {}).get("max_output_tokens")
        if limit is not None and limit != "inf" and not _positive_int(limit):
            raise BadEvent(
                "`response.max_output_tokens` must be a positive integer or 'inf'.",
                code="invalid_value",
                param="response.max_output_tokens",
                event_id=event_id,
            )


def _positive_int(value: Any) -> bool:
    return type(value) is int and value > 0


def session_model(event: ClientEvent, upstream_model: str) -> None:
    """Name the session's model as the upstream knows it (the caller may name no other:
    a session is billed as the model it was opened for)."""
    session = event.body["session"]
    if "model" in session:
        session["model"] = upstream_model


def voice_of(event: ClientEvent) -> str | None:
    """The voice a ``session.update`` or ``response.create`` asks for (a name, or a
    custom voice's ``{id}``), GA or beta shape; ``None`` when it names none."""
    part = event.body.get("session" if event.type == SESSION_UPDATE else "response")
    if not isinstance(part, dict):
        return None
    audio = part.get("audio")
    output = audio.get("output") if isinstance(audio, dict) else None
    voice = output.get("voice") if isinstance(output, dict) else part.get("voice")
    if isinstance(voice, dict):
        voice = voice.get("id")
    return voice if isinstance(voice, str) else None


def transcription_part(event: ClientEvent) -> dict[str, Any] | None:
    """The input transcription a ``session.update`` turns on (GA
    ``session.audio.input.transcription``, beta ``session.input_audio_transcription``),
    when it names a model."""
    session = event.body["session"]
    audio = session.get("audio")
    given = audio.get("input") if isinstance(audio, dict) else None
    part = given.get("transcription") if isinstance(given, dict) else None
    if part is None:
        part = session.get("input_audio_transcription")
    return part if isinstance(part, dict) and "model" in part else None


def transcription_usage(event: dict[str, Any], audio_ms: int) -> Usage:
    """What an ``input_audio_transcription.completed`` event reports (tokens, or a
    duration), with the committed audio's length as Parley measured it."""
    usage = event.get("usage")
    counts = None
    if isinstance(usage, dict) and usage.get("type") == "tokens":
        details = _details(usage.get("input_token_details"))
        counts = reported_counts(
            {
                "input": usage.get("input_tokens"),
                "output": usage.get("output_tokens"),
                "audio": details.get("audio_tokens"),
            },
            source="a realtime upstream's transcription",
            required=("input", "output"),
        )
    if counts is None:
        return Usage(audio_ms=audio_ms, estimated=not isinstance(usage, dict))
    return Usage(
        prompt_tokens=counts["input"],
        completion_tokens=counts["output"],
        audio_ms=audio_ms,
        audio_tokens=min(counts["audio"], counts["input"]),
    )


def session_update(session: dict[str, Any]) -> bytes:
    """A ``session.update`` event of ``session`` (a client secret's)."""
    return orjson.dumps({"type": SESSION_UPDATE, "session": session})


def output_limit(event: ClientEvent, session_limit: int | None) -> int | None:
    """The most output tokens a ``response.create`` allows: its own limit, else the
    session's; ``None`` when neither sets one (or says ``"inf"``)."""
    response = event.body.get("response") or {}
    limit = response.get("max_output_tokens")
    if type(limit) is int and limit > 0:
        return limit
    return session_limit


def error_event(
    message: str,
    *,
    code: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    event_id: str | None = None,
    server_event_id: str = "",
) -> str:
    """An ``error`` server event; ``event_id`` names the client event it answers."""
    error: dict[str, Any] = {"type": kind, "code": code, "message": message, "param": param}
    if event_id is not None:
        error["event_id"] = event_id
    return orjson.dumps({"type": "error", "event_id": server_event_id, "error": error}).decode()


def server_event(frame: str | bytes) -> tuple[str, dict[str, Any]]:
    """The type and body of an upstream's event (``""`` and ``{}`` for one that is not a
    JSON object with a type: relayed as it came, counted for nothing)."""
    try:
        body = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return "", {}
    if not isinstance(body, dict):
        return "", {}
    kind = body.get("type")
    return (kind, body) if isinstance(kind, str) else ("", {})


def bytes_per_second(audio_format: Any) -> int:
    """The byte rate of an audio format object (``{type: "audio/pcm", rate}``, ...)."""
    if isinstance(audio_format, dict) and audio_format.get("type") in ("audio/pcmu", "audio/pcma"):
        return G711_BYTES_PER_SECOND
    if audio_format in ("g711_ulaw", "g711_alaw"):  # the beta's names
        return G711_BYTES_PER_SECOND
    return PCM_BYTES_PER_SECOND


def base64_bytes(text: str) -> int:
    """How many bytes a base64 string holds, without decoding it."""
    return len(text) // 4 * 3 - text[-2:].count("=") if text else 0


@dataclass(slots=True)
class Delivered:
    """What a response sent the caller so far: what a cut one is billed (estimated)."""

    audio_bytes: int = 0
    text_characters: int = 0

    def add(self, kind: str, body: dict[str, Any]) -> None:
        delta = body.get("delta")
        if not isinstance(delta, str):
            return
        if kind in AUDIO_DELTAS:
            self.audio_bytes += base64_bytes(delta)
        elif kind in TEXT_DELTAS:
            self.text_characters += len(delta)

    def usage(self, prompt_tokens: int, audio_prompt_tokens: int, rate: int) -> Usage:
        """The estimate: the turn's input as estimated at admission, and its output as
        delivered (audio at OpenAI's rate, text at four characters a token)."""
        audio = self.audio_bytes * OUTPUT_AUDIO_TOKENS_PER_SECOND // max(rate, 1)
        text = -(-self.text_characters // CHARACTERS_PER_TOKEN)
        return Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=audio + text,
            estimated=True,
            audio_tokens=min(audio_prompt_tokens, prompt_tokens),
            audio_output_tokens=audio,
        )


def audio_input_tokens(audio_bytes: int, rate: int) -> int:
    """An estimate of the tokens ``audio_bytes`` of input audio count for."""
    return -(-audio_bytes * INPUT_AUDIO_TOKENS_PER_SECOND // max(rate, 1))


def turn_usage(response: Any) -> Usage | None:
    """A ``response.done`` response's usage, each part on its own (text and audio input,
    cached input and its audio, text and audio output); ``None`` when it reports none
    valid (``reported_counts``)."""
    if not isinstance(response, dict):
        return None
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None
    source = "a realtime upstream"
    totals = reported_counts(
        {"input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens")},
        source=source,
        required=("input_tokens", "output_tokens"),
    )
    if totals is None:
        return None
    given = _details(usage.get("input_token_details"))
    cached_details = _details(given.get("cached_tokens_details"))
    out = _details(usage.get("output_token_details"))
    parts = reported_counts(
        {
            "audio": given.get("audio_tokens"),
            "cached": given.get("cached_tokens"),
            "cached_audio": cached_details.get("audio_tokens"),
            "audio_out": out.get("audio_tokens"),
        },
        source=source,
        required=(),
    )
    if parts is None:
        return None
    prompt, completion = totals["input_tokens"], totals["output_tokens"]
    cached = min(parts["cached"], prompt)
    audio = min(parts["audio"], prompt)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        audio_tokens=audio,
        cached_audio_tokens=min(parts["cached_audio"], cached, audio),
        audio_output_tokens=min(parts["audio_out"], completion),
    )


def _details(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
