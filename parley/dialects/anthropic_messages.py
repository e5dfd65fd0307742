"""Anthropic Messages as a dialect: its request bodies to the canonical call and back.

``decode_request`` checks and reads a caller's Messages body (a malformed field is an
``Unsupported`` naming it, a 400); ``encode_request`` writes a ``Request`` as a Messages
body for an Anthropic upstream, refusing what Messages cannot say. The reply half
(``message`` objects, stop reasons, usage) is ``anthropic_messages_reply``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeGuard

import orjson

from parley.dialects.canonical import (
    Block,
    Image,
    Message,
    Reasoning,
    Request,
    ResponseFormat,
    Text,
    Thinking,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
    Unsupported,
)
from parley.domain.tokens import (
    CHARS_PER_TOKEN,
    TOKENS_PER_IMAGE,
    TOKENS_PER_MESSAGE,
    estimate_text,
)
from parley.domain.wire import JSON

FIELDS = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "stop_sequences",
        "temperature",
        "top_p",
        "top_k",
        "metadata",
        "thinking",
        "stream",
        "output_config",
        "service_tier",
    }
)
"""The request fields Parley translates for an upstream of another dialect."""
HINTS = frozenset({"cache_control", "inference_geo", "speed"})
"""Fields that ask something only of Anthropic's own servers (prompt caching, where and
how fast the model runs): accepted, and not passed on to an upstream of another dialect,
as a block's ``cache_control`` is not."""
EFFORT_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576, "xhigh": 32768, "max": 32768}
"""``output_config.effort`` → a thinking budget (OpenAI's ``reasoning_effort`` of the
nearest level at or above it: ``xhigh`` and ``max`` are ``high``)."""
SERVICE_TIERS: dict[str, Literal["auto", "default"]] = {"auto": "auto", "standard_only": "default"}
"""Anthropic's ``service_tier`` in the canonical (OpenAI's) terms: ``standard_only`` is
OpenAI's ``default``."""


def decode_request(body: JSON) -> Request:
    """A Messages body, checked, as the canonical call."""
    for name in body:
        if name not in FIELDS and name not in HINTS:
            raise Unsupported(f"The field '{name}' is not supported by Parley.", name)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Unsupported("'model' must be a non-empty string.", "model")
    max_tokens = body.get("max_tokens")
    if not _is_int(max_tokens) or max_tokens < 1:
        raise Unsupported("'max_tokens' must be a positive integer.", "max_tokens")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Unsupported("'messages' must be a non-empty array.", "messages")
    get = body.get
    output_config, tier = get("output_config"), get("service_tier")
    output = {} if output_config is None else _output_config(output_config)
    if tier is not None and tier not in SERVICE_TIERS:
        raise Unsupported("'service_tier' must be 'auto' or 'standard_only'.", "service_tier")
    # An absent field is read here, not by its reader: most bodies hold few of them.
    system, tools, choice = get("system"), get("tools"), get("tool_choice")
    temperature, top_p, top_k = get("temperature"), get("top_p"), get("top_k")
    stop, thinking, metadata = get("stop_sequences"), get("thinking"), get("metadata")
    return Request(  # positionally, in its fields' order (docs/performance.md, Speed habits)
        model,
        tuple([_message(message, index) for index, message in enumerate(messages)]),
        () if system is None else _system(system),  # instructions
        () if tools is None else _tools(tools),
        None if choice is None else _tool_choice(choice),
        max_tokens,  # max_output_tokens
        None if temperature is None else _number(temperature, "temperature", 1.0),
        None if top_p is None else _number(top_p, "top_p", 1.0),
        None if top_k is None else _top_k(top_k),
        () if stop is None else _stop_sequences(stop),
        None if output_config is None else _output_format(output),  # response_format
        _with_effort(None if thinking is None else _thinking(thinking), output.get("effort")),
        None if metadata is None else _user(metadata),
        get("stream") is True,
        None if tier is None else SERVICE_TIERS.get(tier),  # service_tier
    )


PLAIN_FIELDS = frozenset({"model", "max_tokens", "messages", "stream"})
"""The fields of a body ``plain_chat_body`` writes straight."""


def plain_chat_body(body: JSON, model: str) -> JSON | None:
    """The chat body ``openai_chat.encode_request(decode_request(body), model)`` is, for a
    body of ``PLAIN_FIELDS`` alone whose messages are each a user's or an assistant's
    string (most calls), written without the canonical call in between; ``None`` for any
    other body, which goes the long way (and is refused there if it must be).
    ``test_codecs.py`` holds the two ways equal."""
    if not PLAIN_FIELDS.issuperset(body):
        return None
    name, max_tokens, messages = body.get("model"), body.get("max_tokens"), body.get("messages")
    if (
        name.__class__ is not str
        or not name
        or max_tokens.__class__ is not int
        or max_tokens < 1
        or messages.__class__ is not list
        or not messages
    ):
        return None
    written: list[JSON] = []
    for message in messages:
        if message.__class__ is not dict:
            return None
        role, content = message.get("role"), message.get("content")
        if content.__class__ is not str or role not in ("user", "assistant"):
            return None
        written.append({"role": role, "content": content})
    chat: JSON = {"model": model, "messages": written, "max_tokens": max_tokens}
    if body.get("stream") is True:
        chat["stream"] = True
    return chat


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _message(message: Any, index: int) -> Message:
    if message.__class__ is dict:  # the common case first: a role and a string
        role, content = message.get("role"), message.get("content")
        if content.__class__ is str and role in ("user", "assistant"):
            return Message(role, (Text(content),))
    where = f"messages.{index}"
    if not isinstance(message, dict):
        raise Unsupported(f"'{where}' must be an object with 'role' and 'content'.", where)
    role = message.get("role")
    if role not in ("user", "assistant"):
        raise Unsupported(f"'{where}.role' must be 'user' or 'assistant'.", f"{where}.role")
    content = message.get("content")
    if isinstance(content, str):
        return Message(role, (Text(content),))
    if not isinstance(content, list):
        raise Unsupported(
            f"'{where}.content' must be a string or an array of blocks.", f"{where}.content"
        )
    blocks = tuple(_block(block, f"{where}.content.{n}") for n, block in enumerate(content))
    return Message(role, blocks)


def _block(block: Any, where: str) -> Block:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise Unsupported(f"'{where}' must be an object with a 'type'.", where)
    kind, cache = block["type"], block.get("cache_control")
    if kind == "text":
        return Text(_string(block, "text", where), cache)
    if kind == "image":
        return _image(block.get("source"), f"{where}.source", cache)
    if kind == "tool_use":
        arguments = orjson.dumps(block.get("input", {})).decode()
        return ToolCall(
            _string(block, "id", where), _string(block, "name", where), arguments, cache
        )
    if kind == "tool_result":
        return _tool_result(block, where)
    if kind == "thinking":
        return Reasoning(_string(block, "thinking", where), signature=block.get("signature"))
    if kind == "redacted_thinking":
        return Reasoning(redacted=_string(block, "data", where))
    raise Unsupported(
        f"Content blocks of type '{kind}' cannot be sent to this model's upstream.",
        f"{where}.type",
    )


def _string(block: JSON, name: str, where: str) -> str:
    value = block.get(name)
    if not isinstance(value, str):
        raise Unsupported(f"'{where}.{name}' must be a string.", f"{where}.{name}")
    return value


def _image(source: Any, where: str, cache: JSON | None) -> Image:
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "base64" and isinstance(source, dict):
        media_type = _string(source, "media_type", where)
        return Image(media_type=media_type, data=_string(source, "data", where), cache=cache)
    if kind == "url" and isinstance(source, dict):
        return Image(url=_string(source, "url", where), cache=cache)
    raise Unsupported(f"'{where}' must be a base64 or url image source.", where)


def _tool_result(block: JSON, where: str) -> ToolResult:
    content = block.get("content", "")
    parts: list[Text | Image] = []
    if isinstance(content, str):
        parts = [Text(content)] if content else []
    elif isinstance(content, list):
        for n, part in enumerate(content):
            found = _block(part, f"{where}.content.{n}")
            if not isinstance(found, Text | Image):
                raise Unsupported("A tool result holds text and images.", f"{where}.content.{n}")
            parts.append(found)
    else:
        raise Unsupported(f"'{where}.content' must be a string or blocks.", f"{where}.content")
    call_id = _string(block, "tool_use_id", where)
    return ToolResult(
        call_id, tuple(parts), bool(block.get("is_error")), block.get("cache_control")
    )


def _system(system: Any) -> tuple[Text, ...]:
    if system is None:
        return ()
    if isinstance(system, str):
        return (Text(system),) if system else ()
    if not isinstance(system, list):
        raise Unsupported("'system' must be a string or an array of text blocks.", "system")
    blocks: list[Text] = []
    for n, block in enumerate(system):
        found = _block(block, f"system.{n}")
        if not isinstance(found, Text):
            raise Unsupported("'system' holds text blocks only.", f"system.{n}")
        blocks.append(found)
    return tuple(blocks)


def _tools(tools: Any) -> tuple[Tool, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise Unsupported("'tools' must be an array.", "tools")
    found: list[Tool] = []
    for n, tool in enumerate(tools):
        where = f"tools.{n}"
        if not isinstance(tool, dict) or tool.get("type", "custom") != "custom":
            raise Unsupported(
                "Only custom tools (with an input_schema) can be sent to this upstream.", where
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            raise Unsupported(f"'{where}.input_schema' must be an object.", f"{where}.input_schema")
        description = tool.get("description")
        found.append(
            Tool(_string(tool, "name", where), description, schema, tool.get("cache_control"))
        )
    return tuple(found)


def _tool_choice(choice: Any) -> ToolChoice | None:
    if choice is None:
        return None
    kind = choice.get("type") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or kind not in _MODES:
        raise Unsupported("'tool_choice.type' must be auto, any, tool or none.", "tool_choice")
    disable = choice.get("disable_parallel_tool_use")
    parallel = None if disable is None else not disable
    if kind == "tool":
        return ToolChoice("tool", _string(choice, "name", "tool_choice"), parallel)
    return ToolChoice(_MODES[kind], parallel=parallel)


_MODES: dict[str, Literal["auto", "none", "required", "tool"]] = {
    "auto": "auto",
    "any": "required",
    "none": "none",
    "tool": "tool",
}


def _number(value: Any, name: str, most: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= most:
        raise Unsupported(f"'{name}' must be a number from 0 to {most:g}.", name)
    return value


def _top_k(value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or value < 0:
        raise Unsupported("'top_k' must be a non-negative integer.", "top_k")
    return int(value)


def _stop_sequences(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise Unsupported("'stop_sequences' must be an array of strings.", "stop_sequences")
    return tuple(value)


def _thinking(value: Any) -> Thinking | None:
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "disabled":
        return Thinking(enabled=False)
    budget = value.get("budget_tokens") if isinstance(value, dict) else None
    if kind == "enabled" and _is_int(budget):
        return Thinking(enabled=True, budget_tokens=budget)
    if kind == "adaptive":
        return Thinking(enabled=True)
    raise Unsupported("'thinking' must be enabled (with budget_tokens) or disabled.", "thinking")


def _output_config(value: Any) -> JSON:
    """``output_config`` checked: an object of ``effort`` and ``format``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Unsupported("'output_config' must be an object.", "output_config")
    for name in value:
        if name not in ("effort", "format"):
            raise Unsupported(f"'output_config.{name}' is not supported.", f"output_config.{name}")
    effort = value.get("effort")
    if effort is not None and effort not in EFFORT_BUDGETS:
        raise Unsupported(
            f"'output_config.effort' must be one of {', '.join(EFFORT_BUDGETS)}.",
            "output_config.effort",
        )
    return value


def _output_format(output: JSON) -> ResponseFormat | None:
    """``output_config.format`` (a JSON schema the reply follows) as the canonical
    response format."""
    form = output.get("format")
    if form is None:
        return None
    schema = form.get("schema") if isinstance(form, dict) else None
    if not isinstance(schema, dict) or form.get("type") != "json_schema":
        raise Unsupported(
            '\'output_config.format\' must be {"type": "json_schema", "schema": {...}}.',
            "output_config.format",
        )
    return ResponseFormat("json_schema", {"name": "output", "schema": schema})


def _with_effort(thinking: Thinking | None, effort: Any) -> Thinking | None:
    """The thinking asked for, its budget set by ``output_config.effort`` when given
    (unless thinking is off)."""
    if effort is None or (thinking is not None and not thinking.enabled):
        return thinking
    return Thinking(enabled=True, budget_tokens=EFFORT_BUDGETS[effort])


def _user(metadata: Any) -> str | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise Unsupported("'metadata' must be an object.", "metadata")
    for name in metadata:
        if name != "user_id":
            raise Unsupported(f"'metadata.{name}' is not supported.", f"metadata.{name}")
    user = metadata.get("user_id")
    return user if isinstance(user, str) else None


def encode_request(request: Request, model: str, default_max_tokens: int) -> JSON:
    """The canonical call as a Messages body for an Anthropic upstream."""
    if request.temperature is not None and request.temperature > 1:
        raise Unsupported("Anthropic models take a temperature from 0 to 1.", "temperature")
    if request.response_format is not None and request.response_format.type != "text":
        raise Unsupported(
            "Anthropic models take no response_format; describe the JSON in the prompt, or "
            "use a tool whose input_schema is the schema.",
            "response_format",
        )
    body: JSON = {
        "model": model,
        "max_tokens": request.max_output_tokens or default_max_tokens,
        "messages": [_write_message(message) for message in request.messages],
    }
    if request.instructions:
        body["system"] = [write_block(block) for block in request.instructions]
    _write_options(request, body)
    return body


def _write_options(request: Request, body: JSON) -> None:
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.tools:
        body["tools"] = [_write_tool(tool) for tool in request.tools]
    choice = request.tool_choice
    if choice is not None and (request.tools or choice.mode == "none"):
        modes = {"auto": "auto", "required": "any", "none": "none", "tool": "tool"}
        written: JSON = {"type": modes[choice.mode]}
        if choice.mode == "tool":
            written["name"] = choice.name
        if choice.parallel is False and choice.mode != "none":
            written["disable_parallel_tool_use"] = True
        body["tool_choice"] = written
    thinking = request.thinking
    if thinking is not None:
        if thinking.enabled:
            budget = thinking.budget_tokens or 1024
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        else:
            body["thinking"] = {"type": "disabled"}
    if request.user is not None:
        body["metadata"] = {"user_id": request.user}
    if request.stream:
        body["stream"] = True


def _write_message(message: Message) -> JSON:
    blocks = [
        {"type": "text", "text": block.text}  # the common case, without write_block's tests
        if block.__class__ is Text and block.cache is None
        else write_block(block)
        for block in message.blocks
    ]
    return {"role": message.role, "content": [block for block in blocks if block]}


def write_block(block: Block) -> JSON:
    """A canonical block as a Messages content block (``{}`` for reasoning without a
    signature, which cannot go back to the model)."""
    written: JSON
    if isinstance(block, Text):
        written = {"type": "text", "text": block.text}
    elif isinstance(block, Image):
        written = {"type": "image", "source": _write_source(block)}
    elif isinstance(block, ToolCall):
        written = {"type": "tool_use", "id": block.id, "name": block.name}
        written["input"] = _arguments(block.arguments)
    elif isinstance(block, ToolResult):
        parts = [write_block(part) for part in block.content]
        written = {"type": "tool_result", "tool_use_id": block.call_id, "content": parts}
        if block.is_error:
            written["is_error"] = True
    elif block.redacted is not None:
        written = {"type": "redacted_thinking", "data": block.redacted}
    elif block.signature is None:
        return {}  # reasoning without a signature (another model's) cannot go back
    else:
        written = {"type": "thinking", "thinking": block.text, "signature": block.signature}
    cache = getattr(block, "cache", None)
    if cache is not None:
        written["cache_control"] = cache
    return written


def _write_source(image: Image) -> JSON:
    if image.url is not None:
        return {"type": "url", "url": image.url}
    return {"type": "base64", "media_type": image.media_type, "data": image.data}


def _arguments(arguments: str) -> Any:
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        raise Unsupported("A tool call's arguments must be a JSON object.", "tool_calls") from None
    if not isinstance(value, dict):
        raise Unsupported("A tool call's arguments must be a JSON object.", "tool_calls")
    return value


def _write_tool(tool: Tool) -> JSON:
    written: JSON = {"name": tool.name, "input_schema": tool.parameters}
    if tool.description is not None:
        written["description"] = tool.description
    if tool.cache is not None:
        written["cache_control"] = tool.cache
    return written


def estimate_prompt(body: JSON) -> tuple[int, int]:
    """The prompt's tokens, estimated from a Messages body: a token per four characters
    of text (system, messages, tool definitions and calls), a fixed count per image; and
    the image blocks in its messages, found in the same pass."""
    total = 3
    images = 0
    for message in body.get("messages") or ():
        content = message.get("content") if message.__class__ is dict else None
        if content.__class__ is str:  # the common case, without a call
            total += TOKENS_PER_MESSAGE + (len(content) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
        else:
            total += TOKENS_PER_MESSAGE + _estimate_content(content)
            if content.__class__ is list:
                images += sum(
                    1
                    for block in content
                    if isinstance(block, dict) and block.get("type") == "image"
                )
    total += _estimate_content(body.get("system"))
    if body.get("tools"):
        total += estimate_text(orjson.dumps(body["tools"]).decode())
    return total, images


def _estimate_content(content: Any) -> int:
    if isinstance(content, str):
        return estimate_text(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "image":
            total += TOKENS_PER_IMAGE
        elif kind in ("text", "thinking") and isinstance(block.get(kind), str):
            total += estimate_text(block[kind])
        elif kind == "tool_use":
            total += estimate_text(orjson.dumps(block.get("input")).decode())
        elif kind == "tool_result":
            total += _estimate_content(block.get("content"))
    return total
