"""An OpenAI chat body written for an upstream of another dialect, in one place.

A channel that does not speak OpenAI's chat format (Anthropic, Gemini, Bedrock, and
Vertex AI's models of either kind) reads the chat body into the canonical call
(``openai_chat.decode_request``) and writes it in its own wire format. ``Codec`` names
that writing, with what changes it per channel (the default ``max_tokens``, whether
images may go by URL, how JSON output is asked for); ``encode`` does it.

For a large body the writing is done in a body process (``api/apart.py``), before the
adapter sees the call: the chat body it gets is then a ``Translated``, which carries the
upstream's body already written, its bulk as ``orjson.Fragment``. ``outbound`` is what
an adapter calls either way: the ready body when there is one for its codec, else the
body written here. The model is set last (it is the route's, not the body's).
"""

from __future__ import annotations

from typing import Any, Literal

from parley.dialects import anthropic_messages, bedrock_converse, gemini, openai_chat
from parley.dialects.bedrock_converse import StructuredOutput
from parley.domain.value import value
from parley.domain.wire import JSON

Dialect = Literal["anthropic", "gemini", "bedrock"]


@value
class Codec:
    """How a chat body is written for one kind of upstream."""

    dialect: Dialect
    default_max_tokens: int = 0
    """``max_tokens`` when the caller gave none (Messages needs one)."""
    remote_images: bool = False
    """Images may go by URL (Vertex AI fetches them)."""
    structured: StructuredOutput = "native"
    """How Bedrock is asked for a ``json_schema`` (``aws.structured_output``)."""


def encode(chat: JSON, codec: Codec, model: str) -> tuple[JSON, bool]:
    """``chat`` as the upstream's body, without ``stream``, and whether its JSON output
    rides in Bedrock's forced tool; raises ``Unsupported`` for what it cannot say."""
    request = openai_chat.decode_request(chat)
    if codec.dialect == "anthropic":
        payload = anthropic_messages.encode_request(request, model, codec.default_max_tokens)
        payload.pop("stream", None)
        return payload, False
    if codec.dialect == "gemini":
        return gemini.encode_request(request, remote_images=codec.remote_images), False
    payload = bedrock_converse.encode_request(request, codec.structured)
    return payload, bedrock_converse.json_tool(request, codec.structured)


class Translated(dict[str, Any]):
    """A chat body that comes with its upstream body already written for ``codec`` (in a
    body process): ``payload``, its large values as ``orjson.Fragment``."""

    __slots__ = ("codec", "json_tool", "payload")

    def __init__(self, chat: JSON, codec: Codec, payload: JSON, json_tool: bool) -> None:
        super().__init__(chat)
        self.codec = codec
        self.payload = payload
        self.json_tool = json_tool


def outbound(chat: JSON, codec: Codec, model: str) -> tuple[JSON, bool]:
    """The upstream's body for ``chat`` (a new dict the adapter may change): the one
    written in a body process when ``chat`` carries it for this codec, else ``encode``'s."""
    if isinstance(chat, Translated) and chat.codec == codec:
        payload = dict(chat.payload)
        if codec.dialect == "anthropic":
            payload["model"] = model
        return payload, chat.json_tool
    return encode(chat, codec, model)
