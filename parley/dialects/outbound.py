"""The canonical call written for an upstream of another dialect, in one place.

A channel that does not speak the caller's dialect (``dialects.call.passes_through``)
is sent the canonical ``Request`` written in its own: Messages (Anthropic, Vertex AI's
Claude models), Gemini's ``GenerateContentRequest`` (Gemini, Vertex AI's Gemini models)
or Bedrock's Converse body. ``Codec`` (``dialects/call.py``) names that writing, with
what changes it per channel; ``encode`` does it, and ``translate`` does it from a
caller's body in its dialect, which is what a body process runs for a large body.

For a large body the writing is done in a body process (``api/apart.py``), before the
adapter sees the call: the call then carries the upstream's body already written
(``ChatCall.translated``), its bulk as ``orjson.Fragment``. ``outbound`` is what an
adapter calls either way: the ready body when the call carries one for its codec, else
``call.request`` written here. The model is set last (it is the route's, not the body's).
"""

from __future__ import annotations

from collections.abc import Callable

from parley.dialects import anthropic_messages, bedrock_converse, gemini, openai_chat
from parley.dialects.call import (
    ANTHROPIC_MESSAGES,
    OPENAI_CHAT,
    ChatCall,
    Codec,
    Dialect,
    Translated,
)
from parley.dialects.canonical import Request, Unsupported
from parley.domain.wire import JSON

__all__ = ["Codec", "Translated", "chat_body", "encode", "outbound", "translate"]

DECODERS: dict[Dialect, Callable[[JSON], Request]] = {
    OPENAI_CHAT: openai_chat.decode_request,
    ANTHROPIC_MESSAGES: anthropic_messages.decode_request,
}
"""The readers of the callers' dialects whose large bodies are translated apart."""


def encode(request: Request, codec: Codec, model: str) -> tuple[JSON, bool]:
    """``request`` as the upstream's body, without ``stream``, and whether its JSON
    output rides in Bedrock's forced tool; raises ``Unsupported`` for what it cannot say."""
    if codec.dialect == "anthropic":
        payload = anthropic_messages.encode_request(request, model, codec.default_max_tokens)
        payload.pop("stream", None)
        return payload, False
    if codec.dialect == "gemini":
        return gemini.encode_request(request, remote_images=codec.remote_images), False
    payload = bedrock_converse.encode_request(request, codec.structured)
    return payload, bedrock_converse.json_tool(request, codec.structured)


def chat_body(request: Request, model: str, tiered: bool) -> JSON:
    """``request`` as an OpenAI chat body for an OpenAI-compatible upstream, its service
    tier asked for when ``tiered`` (OpenAI's own API, the only one with tiers); raises
    ``Unsupported`` for what chat cannot say."""
    body = openai_chat.encode_request(request, model)
    tier = request.service_tier
    if tier is not None and tiered:
        body["service_tier"] = tier
    return body


def translate(body: JSON, source: Dialect, codec: Codec) -> tuple[JSON, bool]:
    """A caller's ``body`` in its ``source`` dialect read and written by ``codec``, the
    model left empty (what a body process does for a large body)."""
    decode = DECODERS.get(source)
    if decode is None:
        raise Unsupported(f"A {source} body is not translated apart.", None)
    return encode(decode(body), codec, "")


def outbound(call: ChatCall, codec: Codec, model: str) -> tuple[JSON, bool]:
    """The upstream's body for ``call`` (a new dict the adapter may change): the one
    written in a body process when ``call`` carries it for this codec, else
    ``call.request`` written by ``encode``."""
    ready = call.translated
    if ready is not None and ready.codec == codec:
        payload = dict(ready.payload)
        if codec.dialect == "anthropic":
            payload["model"] = model
        return payload, ready.json_tool
    return encode(call.request, codec, model)
