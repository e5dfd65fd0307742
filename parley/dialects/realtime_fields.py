"""What a realtime cascade reads of its caller's events: the session's settings (audio
formats, voice detection, tools, output limit) and the conversation items it is given,
each checked and refused with a ``BadEvent`` naming the field (``api/cascade.py``, which
speaks the session; docs/realtime.md, Cascade). A relayed session sends these on as they
came, so only the cascade reads them."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from parley.dialects.realtime import BadEvent

RATE = 24_000
"""The cascade's audio, both ways: 16-bit mono PCM at 24 kHz (``audio/pcm``)."""
NOT_PCM = "This voice takes and speaks audio/pcm at 24000 Hz only."
SERVER_VAD = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 500,
    "create_response": True,
    "interrupt_response": True,
}
"""OpenAI's server voice detection defaults, which a cascade session starts with."""


def read_audio(text: str, event_id: str | None) -> bytes:
    try:
        pcm = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadEvent(
            "`audio` must be base64 of PCM16 audio.",
            code="invalid_value",
            param="audio",
            event_id=event_id,
        ) from None
    return pcm


def read_object(value: Any, param: str, event_id: str | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadEvent(
            f"`{param}` must be an object.", code="invalid_value", param=param, event_id=event_id
        )
    return value


def read_string(value: Any, param: str, event_id: str | None) -> str:
    if not isinstance(value, str):
        raise BadEvent(
            f"`{param}` must be a string.", code="invalid_value", param=param, event_id=event_id
        )
    return value


def check_formats(
    session: dict[str, Any],
    given_in: dict[str, Any],
    given_out: dict[str, Any],
    event_id: str | None,
) -> None:
    """The audio formats a ``session.update`` names are the one the cascade speaks."""
    for side, part in (("input", given_in), ("output", given_out)):
        if "format" in part and not is_pcm(part["format"]):
            raise BadEvent(
                NOT_PCM,
                code="invalid_value",
                param=f"session.audio.{side}.format",
                event_id=event_id,
            )
    for beta in ("input_audio_format", "output_audio_format"):
        if beta in session and session[beta] != "pcm16":
            raise BadEvent(NOT_PCM, code="invalid_value", param=beta, event_id=event_id)


def is_pcm(value: Any) -> bool:
    if value == "pcm16":
        return True
    return (
        isinstance(value, dict)
        and value.get("type") == "audio/pcm"
        and value.get("rate", RATE) == RATE
    )


def read_modalities(value: Any, event_id: str | None) -> list[str]:
    if isinstance(value, list) and "audio" in value:
        return ["audio"]
    if value == ["text"]:
        return ["text"]
    raise BadEvent(
        '`output_modalities` must be ["audio"] or ["text"].',
        code="invalid_value",
        param="output_modalities",
        event_id=event_id,
    )


def read_turn_detection(value: Any, event_id: str | None) -> dict[str, Any] | None:
    """``null`` (the caller commits), or server voice activity detection's settings."""
    if value is None:
        return None
    param = "session.audio.input.turn_detection"
    if not isinstance(value, dict) or value.get("type", "server_vad") != "server_vad":
        raise BadEvent(
            "`turn_detection` must be null or of type server_vad (semantic_vad is not offered).",
            code="invalid_value",
            param=param,
            event_id=event_id,
        )
    settings = {**SERVER_VAD, **{k: v for k, v in value.items() if v is not None}}
    threshold = settings["threshold"]
    if (
        not isinstance(threshold, int | float)
        or isinstance(threshold, bool)
        or not 0 <= threshold <= 1
    ):
        raise BadEvent(
            "`threshold` must be a number from 0 to 1.",
            code="invalid_value",
            param=f"{param}.threshold",
            event_id=event_id,
        )
    for name in ("prefix_padding_ms", "silence_duration_ms"):
        if type(settings[name]) is not int or not 0 <= settings[name] <= 10_000:
            raise BadEvent(
                f"`{name}` must be an integer from 0 to 10000.",
                code="invalid_value",
                param=f"{param}.{name}",
                event_id=event_id,
            )
    for name in ("create_response", "interrupt_response"):
        if not isinstance(settings[name], bool):
            raise BadEvent(
                f"`{name}` must be true or false.",
                code="invalid_value",
                param=f"{param}.{name}",
                event_id=event_id,
            )
    return {key: settings[key] for key in SERVER_VAD}


def read_tools(value: Any, event_id: str | None) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(
        isinstance(tool, dict)
        and tool.get("type", "function") == "function"
        and isinstance(tool.get("name"), str)
        for tool in value
    ):
        raise BadEvent(
            "`tools` must be a list of functions, each with a `name`.",
            code="invalid_value",
            param="tools",
            event_id=event_id,
        )
    return value


def read_limit(value: Any, event_id: str | None) -> int | str:
    if value == "inf" or (type(value) is int and value > 0):
        return value  # type: ignore[no-any-return]
    raise BadEvent(
        "`max_output_tokens` must be a positive integer or 'inf'.",
        code="invalid_value",
        param="max_output_tokens",
        event_id=event_id,
    )


def read_item(value: Any, event_id: str | None) -> dict[str, Any]:
    """A caller's item, checked: a message (text, or audio to transcribe), a function
    call, or a function call's output. Audio is kept aside as ``_audio``."""
    item = read_object(value, "item", event_id)
    kind = item.get("type")
    given_id = item.get("id")
    if given_id is not None and not isinstance(given_id, str):
        raise BadEvent(
            "`item.id` must be a string.", code="invalid_value", param="item.id", event_id=event_id
        )
    base: dict[str, Any] = {"object": "realtime.item", "status": "completed"}
    if given_id:
        base["id"] = given_id
    if kind == "function_call_output":
        call_id = read_string(item.get("call_id"), "item.call_id", event_id)
        output = read_string(item.get("output"), "item.output", event_id)
        return {**base, "type": kind, "call_id": call_id, "output": output}
    if kind == "function_call":
        return {
            **base,
            "type": kind,
            "call_id": read_string(item.get("call_id"), "item.call_id", event_id),
            "name": read_string(item.get("name"), "item.name", event_id),
            "arguments": read_string(item.get("arguments", ""), "item.arguments", event_id),
        }
    if kind != "message" or item.get("role") not in ("user", "assistant", "system"):
        raise BadEvent(
            "`item` must be a message (role user, assistant or system), a function_call "
            "or a function_call_output.",
            code="invalid_value",
            param="item",
            event_id=event_id,
        )
    content = item.get("content")
    if not isinstance(content, list) or not content:
        raise BadEvent(
            "`item.content` must be a list of parts.",
            code="invalid_value",
            param="item.content",
            event_id=event_id,
        )
    parts: list[dict[str, Any]] = []
    audio = b""
    for part in content:
        kind_of = part.get("type") if isinstance(part, dict) else None
        assert kind_of is None or isinstance(part, dict)
        if kind_of in ("input_text", "text", "output_text"):
            parts.append(
                {
                    "type": kind_of,
                    "text": read_string(part.get("text"), "item.content.text", event_id),
                }
            )
        elif kind_of == "input_audio" and item["role"] == "user":
            audio += read_audio(
                read_string(part.get("audio"), "item.content.audio", event_id), event_id
            )
            parts.append({"type": "input_audio", "transcript": None})
        else:
            raise BadEvent(
                "A message part is input_text or text (and, from the user, input_audio).",
                code="invalid_value",
                param="item.content",
                event_id=event_id,
            )
    made = {**base, "type": "message", "role": item["role"], "content": parts}
    if audio:
        made["_audio"] = audio
    return made


def item_text(item: dict[str, Any]) -> str:
    """A message's words: its texts and transcripts, in order."""
    words = []
    for part in item.get("content") or ():
        said = part.get("text") if "text" in part else part.get("transcript")
        if isinstance(said, str) and said:
            words.append(said)
    return " ".join(words)
