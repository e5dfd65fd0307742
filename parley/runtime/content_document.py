"""What a captured call becomes in the content log: one JSON document, off the request
path (the content log's thread).

The document holds, for every policy that keeps something, the call's endpoint, model,
status and finish reason, and the request's and the reply's sizes (bytes; the
request's messages or input items; whether what is kept was cut). A ``redacted`` or
``full`` policy adds their text: the request body as sent, and the reply as received
(a whole reply's body; a stream's text, assembled from its events), each cut at
``content.max_bytes``, and for ``redacted`` masked (``content_masks.py``). A binary
reply (audio, an image) is never kept as text: its type and size are.

A stream's text is read from the events of the dialects Parley speaks: OpenAI chat
(``choices[].delta.content``), completions (``choices[].text``), Responses
(``response.output_text.delta``) and Anthropic Messages (``content_block_delta``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from parley.runtime.content_capture import TEXT_TYPES, ContentCapture, PreparedContent
from parley.runtime.content_masks import masked

CUT_MARK = "…"


def document(
    capture: ContentCapture, *, endpoint: str, model: str, status: int
) -> tuple[dict[str, Any], PreparedContent]:
    """The stored document of ``capture``, and the texts it holds."""
    keeps_text = capture.logging.keeps_text
    events = list(_events(capture)) if capture.streamed else []
    request_body = (
        _json(capture.request) if capture.request_bytes == len(capture.request or b"") else None
    )
    request: dict[str, Any] = {
        "bytes": capture.request_bytes,
        "items": _items(request_body),
        "truncated": capture.request_bytes > capture.max_bytes,
    }
    reply: dict[str, Any] = {
        "bytes": capture.reply_bytes,
        "content_type": capture.reply_type or None,
        "streamed": capture.streamed,
    }
    request_text = reply_text = None
    if keeps_text:
        request_text = _decoded(capture.request or b"")
        reply_text, reply["truncated"] = _reply_text(capture, events)
        if capture.logging.policy == "redacted":
            request_text = masked(request_text)
            reply_text = masked(reply_text) if reply_text is not None else None
        request["text"] = request_text
        reply["text"] = reply_text
    finish = _stream_finish(events) if capture.streamed else _whole_finish(capture)
    body = {
        "policy": capture.logging.policy,
        "endpoint": endpoint,
        "model": model,
        "status": status,
        "finish_reason": finish,
        "request": request,
        "reply": reply,
    }
    return body, PreparedContent(capture.logging.policy, request_text, reply_text)


def _reply_text(capture: ContentCapture, events: list[dict[str, Any]]) -> tuple[str | None, bool]:
    """The reply's text and whether it was cut; ``None`` for a binary reply."""
    if not capture.reply_type.startswith(TEXT_TYPES):
        return None, False
    if not capture.streamed:
        return _decoded(bytes(capture.reply)), capture.reply_bytes > capture.max_bytes
    pieces = _stream_text(events)
    # events of no dialect read here are kept as their bytes were
    text = _decoded(bytes(capture.reply)) if pieces is None else "".join(pieces)
    encoded = text.encode()
    if len(encoded) > capture.max_bytes:
        return _decoded(encoded[: capture.max_bytes]) + CUT_MARK, True
    return (text + CUT_MARK, True) if capture.cut else (text, False)


def _decoded(raw: bytes) -> str:
    """UTF-8 text; a character cut in two at the end by the cap is dropped."""
    return raw.decode("utf-8", "ignore") if raw else ""


def _json(raw: bytes | None) -> Any:
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def _items(body: Any) -> int | None:
    """How many messages (or input items) the request held, when it was kept whole."""
    if not isinstance(body, dict):
        return None
    for name in ("messages", "input", "prompt"):
        value = body.get(name)
        if isinstance(value, list):
            return len(value)
        if isinstance(value, str):
            return 1
    return None


def _events(capture: ContentCapture) -> Iterator[dict[str, Any]]:
    """The JSON events of a server-sent-events stream: its kept head, then its tail."""
    for chunk in (bytes(capture.reply), *capture.tail):
        for line in chunk.splitlines():
            if line.startswith(b"data:"):
                event = _json(line[5:].strip())
                if isinstance(event, dict):
                    yield event


def _stream_text(events: Iterable[dict[str, Any]]) -> list[str] | None:
    pieces: list[str] = []
    known = False
    for event in events:
        kind = event.get("type")
        if kind in {"response.output_text.delta", "content_block_delta"}:
            known = True
            delta = event.get("delta")
            if isinstance(delta, dict):
                delta = delta.get("text")
            if isinstance(delta, str):
                pieces.append(delta)
            continue
        choices = event.get("choices")
        if isinstance(choices, list):
            known = True
            for choice in choices:
                if not isinstance(choice, dict):
                    continue
                delta = choice.get("delta")
                text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
                if isinstance(text, str):
                    pieces.append(text)
        elif kind is not None:
            known = True
    return pieces if known else None


def _stream_finish(events: Iterable[dict[str, Any]]) -> str | None:
    """The last finish reason a stream's events named."""
    found = None
    for event in events:
        reason = _finish_of(event)
        delta = event.get("delta")
        if reason is None and isinstance(delta, dict):
            reason = delta.get("stop_reason")
        if isinstance(reason, str):
            found = reason
    return found


def _whole_finish(capture: ContentCapture) -> str | None:
    if capture.reply_bytes > capture.max_bytes:
        return None
    reply = _json(bytes(capture.reply))
    return _finish_of(reply) if isinstance(reply, dict) else None


def _finish_of(reply: dict[str, Any]) -> str | None:
    """A reply's (or an event's) finish reason in any dialect: OpenAI's
    ``choices[0].finish_reason``, Anthropic's ``stop_reason``, a Responses status."""
    choices = reply.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        reason = choices[0].get("finish_reason")
        return reason if isinstance(reason, str) else None
    reason = reply.get("stop_reason")
    if isinstance(reason, str):
        return reason
    response = reply.get("response") if reply.get("object") != "response" else reply
    if isinstance(response, dict) and response.get("object") == "response":
        status = response.get("status")
        if isinstance(status, str) and status != "in_progress":
            return status
    return None
