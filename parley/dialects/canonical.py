"""The canonical call: one model of a generation request and its reply, for every dialect.

A caller speaks a dialect (OpenAI chat, Anthropic Messages...) and so does an upstream.
When they differ, an ingress codec turns the caller's body into a ``Request``, an egress
codec turns that into the upstream's body, and the reply comes back the same way as a
``Reply``. Every dialect's codec holds both directions for its wire format (OpenAI chat's
requests in ``openai_chat`` and its replies in ``openai_chat_reply``; Anthropic's in
``anthropic_messages`` and ``anthropic_messages_reply``), so a new dialect is a codec
that reads and writes these types, and a new provider is an adapter that calls one of
them.

Content is a message of blocks: text, image, tool call, tool result and reasoning (with
the signature or encrypted content that lets it go back to the model that wrote it).
Fields one dialect has and another cannot say are a ``Unsupported`` naming the field,
raised by the codec that cannot write them: never dropped silently.

Pure types, no I/O; built once per call, off the per-token path. Every one is a ``@value``
record, immutable to the type checker and cheap to build: blocks and messages, of which a
body may hold a million, and the ``Request`` and ``Reply`` every translated call builds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import field
from typing import Literal

from parley.domain.usage import Usage
from parley.domain.value import value
from parley.domain.wire import JSON

Role = Literal["user", "assistant"]
Stop = Literal["end", "length", "tool_calls", "stop_sequence", "content_filter", "pause"]
"""Why a reply ended, in the canonical terms each dialect maps from and to."""


class Unsupported(ValueError):
    """A field the target dialect cannot express (or a malformed one): a 400 that names
    ``param``, raised by a codec and rendered by the caller's dialect."""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@value
class Text:
    text: str
    cache: JSON | None = None
    """Anthropic's ``cache_control`` on the block, when the caller set one."""


@value
class Image:
    """An image by value (``data``: base64 with its ``media_type``) or by ``url``."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    cache: JSON | None = None


@value
class ToolCall:
    """The model asks for a tool: ``arguments`` is the JSON text of its input."""

    id: str
    name: str
    arguments: str
    cache: JSON | None = None


@value
class ToolResult:
    """What a tool returned to the call ``call_id``: text and images."""

    call_id: str
    content: tuple[Text | Image, ...]
    is_error: bool = False
    cache: JSON | None = None


@value
class Reasoning:
    """The model's thinking: its text and ``signature`` (Anthropic), or ``redacted``
    encrypted content the model alone can read."""

    text: str = ""
    signature: str | None = None
    redacted: str | None = None


Block = Text | Image | ToolCall | ToolResult | Reasoning


@value
class Message:
    role: Role
    blocks: tuple[Block, ...]


def merged(messages: Iterable[Message]) -> list[Message]:
    """Consecutive messages of one role as one turn (a reply's text and its calls; tool
    results and the user's next words), for dialects whose turns alternate. Each run's
    blocks are gathered into one list and made a tuple once, so the work grows with the
    number of blocks, however long a run is."""
    turns: list[Message] = []
    run: list[Message] = []
    role = None
    for message in messages:
        if message.role != role:
            if run:
                turns.append(_joined(run))
            run = [message]
            role = message.role
        else:
            run.append(message)
    if run:
        turns.append(_joined(run))
    return turns


def _joined(run: list[Message]) -> Message:
    if len(run) == 1:
        return run[0]
    return Message(run[0].role, tuple(block for message in run for block in message.blocks))


@value
class Tool:
    name: str
    description: str | None
    parameters: JSON
    """The JSON Schema of the tool's input."""
    cache: JSON | None = None


@value
class ToolChoice:
    """``auto``, ``none``, ``required`` (some tool) or ``tool`` (the one ``name``)."""

    mode: Literal["auto", "none", "required", "tool"]
    name: str | None = None
    parallel: bool | None = None
    """``False`` when the caller forbade several calls at once."""


@value
class Thinking:
    """Extended thinking: on with a budget of tokens, or off."""

    enabled: bool
    budget_tokens: int | None = None


@value
class ResponseFormat:
    """``text``, ``json_object`` or ``json_schema`` (with ``schema``)."""

    type: Literal["text", "json_object", "json_schema"]
    schema: JSON | None = None


@value
class Request:
    """One generation request, whatever dialect it came in."""

    model: str
    messages: tuple[Message, ...]
    instructions: tuple[Text, ...] = ()
    """System (or developer) instructions, in order."""
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: tuple[str, ...] = ()
    response_format: ResponseFormat | None = None
    thinking: Thinking | None = None
    user: str | None = None
    """Who the end user is, for the upstream's abuse checks."""
    stream: bool = False
    service_tier: Literal["auto", "default"] | None = None
    """The capacity tier asked for, in OpenAI's terms (Anthropic's ``standard_only`` is
    ``default``), for an upstream that has tiers."""


@value
class Reply:
    """One whole reply: what the model produced, why it stopped, what it used."""

    id: str
    model: str
    blocks: tuple[Block, ...]
    stop: Stop | None
    usage: Usage | None
    """``None`` when the upstream reported none (the job then estimates)."""
    stop_sequence: str | None = None
    extra: JSON = field(default_factory=dict)


def text_of(blocks: tuple[Block, ...]) -> str:
    """The text blocks' text, joined: what a reply said, for estimates."""
    return "".join(block.text for block in blocks if isinstance(block, Text))


def produced_characters(blocks: tuple[Block, ...]) -> int:
    """Characters a reply produced: text, reasoning and tool calls (for estimates)."""
    size = 0
    for block in blocks:
        if isinstance(block, Text | Reasoning):
            size += len(block.text)
        elif isinstance(block, ToolCall):
            size += len(block.name) + len(block.arguments)
    return size
