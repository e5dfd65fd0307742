"""The fake engine's ``POST /v1/responses``: an upstream that serves OpenAI's Responses
API itself (for channels with ``responses: native``), written from OpenAI's API
reference.

The reply thinks first (a ``reasoning`` item with a summary and ``encrypted_content``
``ENCRYPTED`` + its number), runs a ``web_search_call`` when a ``web_search`` tool is
offered, and says ``"echo: "`` + the last user text (under an id no store could keep,
``resp up/<n>``, for a model named with ``+odd-id``). Usage counts words: the input's,
the reply's and ``REASONING_TOKENS``. Streamed (``"stream": true``): ``response.created``,
``response.in_progress``, each item's ``response.output_item.added`` / ``.done`` (the
message's text as ``response.output_text.delta`` events between its content part's
``added`` and ``done``) and ``response.completed``, numbered by ``sequence_number``. A
model named with a ``+cut-N`` part streams N events, then ends its body, with no
terminal ``response.*`` event.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tests.upstreams.server import JSON

ENCRYPTED = "gAAAA-fake-encrypted-"
REASONING_TOKENS = 2
CREATED_AT = 1_700_000_000


def last_user_text(body: JSON) -> str:
    given = body.get("input")
    if isinstance(given, str):
        return given
    for item in reversed(given if isinstance(given, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return " ".join(
                str(part.get("text", "")) for part in content or [] if isinstance(part, dict)
            )
    return ""


def input_words(body: JSON) -> int:
    return len(orjson.dumps(body.get("input")).decode().split()) + len(
        str(body.get("instructions") or "").split()
    )


def response_for(body: JSON, number: int) -> JSON:
    """The whole ``response`` the engine answers ``body`` with."""
    words = f"echo: {last_user_text(body)}".split()
    output: list[JSON] = [
        {
            "id": f"rs_up{number}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Thinking it over."}],
            "encrypted_content": f"{ENCRYPTED}{number}",
        }
    ]
    if any(isinstance(t, dict) and t.get("type") == "web_search" for t in body.get("tools") or []):
        output.append(
            {
                "id": f"ws_up{number}",
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": last_user_text(body)},
            }
        )
    output.append(
        {
            "id": f"msg_up{number}",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": " ".join(words), "annotations": [], "logprobs": []}
            ],
        }
    )
    prompt, produced = input_words(body), len(words) + REASONING_TOKENS
    return {
        "id": f"resp up/{number}" if "+odd-id" in str(body.get("model")) else f"resp_up{number}",
        "object": "response",
        "created_at": CREATED_AT,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": body.get("model"),
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"),
        "store": body.get("store", True),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": produced,
            "output_tokens_details": {"reasoning_tokens": REASONING_TOKENS},
            "total_tokens": prompt + produced,
        },
        "metadata": body.get("metadata") or {},
    }


def stream_events(response: JSON) -> list[JSON]:
    """The events of ``response`` streamed, in order, numbered."""
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[JSON] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(response["output"]):
        at = {"output_index": index}
        if item["type"] != "message":
            events.append({"type": "response.output_item.added", **at, "item": item})
            events.append({"type": "response.output_item.done", **at, "item": item})
            continue
        text = item["content"][0]["text"]
        empty = {**item, "status": "in_progress", "content": []}
        part = {"item_id": item["id"], **at, "content_index": 0}
        events.append({"type": "response.output_item.added", **at, "item": empty})
        blank = {"type": "output_text", "text": "", "annotations": []}
        events.append({"type": "response.content_part.added", **part, "part": blank})
        for i, word in enumerate(text.split(" ")):
            delta = word if i == 0 else f" {word}"
            events.append({"type": "response.output_text.delta", **part, "delta": delta})
        events.append({"type": "response.output_text.done", **part, "text": text})
        events.append({"type": "response.content_part.done", **part, "part": item["content"][0]})
        events.append({"type": "response.output_item.done", **at, "item": item})
    events.append({"type": "response.completed", "response": response})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def _cut(model: str) -> int | None:
    """N of a ``+cut-N`` part of the model's name: the events a stream sends."""
    for part in model.split("+"):
        if part.startswith("cut-"):
            return int(part.removeprefix("cut-"))
    return None


async def answer(request: web.Request, body: Any, number: int) -> web.StreamResponse:
    """Answer a Responses call (already authorised and recorded)."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        error = {"message": "Missing model.", "type": "invalid_request_error",
                 "param": "model", "code": None}  # fmt: skip
        return web.json_response({"error": error}, status=400)
    response = response_for(body, number)
    if not body.get("stream"):
        return web.Response(body=orjson.dumps(response), content_type="application/json")
    reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await reply.prepare(request)
    for event in stream_events(response)[: _cut(body["model"])]:
        data = orjson.dumps(event)
        await reply.write(b"event: " + event["type"].encode() + b"\ndata: " + data + b"\n\n")
    await reply.write_eof()
    return reply
