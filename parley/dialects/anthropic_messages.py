"""Anthropic Messages as a dialect: its bodies to the canonical call and back.

``decode_request`` checks and reads a caller's Messages body (a malformed field is an
``Unsupported`` naming it, a 400); ``encode_request`` writes a ``Request`` as a Messages
body for an Anthropic upstream, refusing what Messages cannot say. ``decode_reply`` and
``encode_reply`` do the same for ``message`` objects. Usage: Anthropic's
``input_tokens`` leaves out the cached ones, which ``Usage.prompt_tokens`` counts.
"""

from __future__ import annotations

from typing import Any, Literal, TypeGuard

import orjson

from parley import upstream_json
from parley.dialects.canonical import (
    Block,
    Image,
    Message,
    Reasoning,
    Reply,
    Request,
    Stop,
    Text,
    Thinking,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResult,
    Unsupported,
)
from parley.domain.usage import Usage, reported_usage
from parley.domain.wire import JSON

STOP_REASONS: dict[str, Stop] = {
    "end_turn": "end",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
    "pause_turn": "pause",
}
STOP_TO_REASON: dict[Stop, str] = {
    "end": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
    "pause": "pause_turn",
}
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
    }
)
"""The request fields Parley translates for an upstream of another dialect."""


def decode_request(body: JSON) -> Request:
    """A Messages body, checked, as the canonical call."""
    for name in body:
        if name not in FIELDS:
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
    return Request(
        model=model,
        messages=tuple(_message(message, index) for index, message in enumerate(messages)),
        instructions=_system(body.get("system")),
        tools=_tools(body.get("tools")),
        tool_choice=_tool_choice(body.get("tool_choice")),
        max_output_tokens=max_tokens,
        temperature=_number(body, "temperature", 1.0),
        top_p=_number(body, "top_p", 1.0),
        top_k=_top_k(body.get("top_k")),
        stop=_stop_sequences(body.get("stop_sequences")),
        thinking=_thinking(body.get("thinking")),
        user=_user(body.get("metadata")),
        stream=body.get("stream") is True,
    )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _message(message: Any, index: int) -> Message:
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


def _number(body: JSON, name: str, most: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
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
        body["system"] = [_write_block(block) for block in request.instructions]
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
    blocks = [_write_block(block) for block in message.blocks]
    return {"role": message.role, "content": [block for block in blocks if block]}


def _write_block(block: Block) -> JSON:
    written: JSON
    if isinstance(block, Text):
        written = {"type": "text", "text": block.text}
    elif isinstance(block, Image):
        written = {"type": "image", "source": _write_source(block)}
    elif isinstance(block, ToolCall):
        written = {"type": "tool_use", "id": block.id, "name": block.name}
        written["input"] = _arguments(block.arguments)
    elif isinstance(block, ToolResult):
        parts = [_write_block(part) for part in block.content]
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


def decode_reply(reply: JSON) -> Reply:
    """A Messages ``message`` object as the canonical reply."""
    blocks: list[Block] = []
    for block in reply.get("content") or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            blocks.append(Text(str(block.get("text", ""))))
        elif kind == "tool_use":
            arguments = orjson.dumps(block.get("input", {})).decode()
            blocks.append(ToolCall(str(block.get("id", "")), str(block.get("name")), arguments))
        elif kind == "thinking":
            blocks.append(Reasoning(str(block.get("thinking", "")), block.get("signature")))
        elif kind == "redacted_thinking":
            blocks.append(Reasoning(redacted=str(block.get("data", ""))))
    reason = reply.get("stop_reason")
    sequence = reply.get("stop_sequence")
    return Reply(
        id=str(reply.get("id") or ""),
        model=str(reply.get("model") or ""),
        blocks=tuple(blocks),
        stop=STOP_REASONS.get(reason) if isinstance(reason, str) else None,
        usage=read_usage(reply.get("usage")),
        stop_sequence=sequence if isinstance(sequence, str) else None,
    )


def read_usage(usage: Any, output_tokens: int | None = None) -> Usage | None:
    """Anthropic's ``usage`` as ``Usage``: ``prompt_tokens`` is input, cache reads and
    cache writes together. ``None`` without an input and an output count."""
    if not isinstance(usage, dict):
        return None
    output = usage.get("output_tokens") if output_tokens is None else output_tokens
    counts = {"input_tokens": usage.get("input_tokens"), "output_tokens": output}
    counted = reported_usage(
        counts, source="the Anthropic upstream", prompt="input_tokens", completion="output_tokens"
    )
    if counted is None:
        return None
    fresh, output = counted.prompt_tokens, counted.completion_tokens
    read = _count(usage.get("cache_read_input_tokens"))
    write = _count(usage.get("cache_creation_input_tokens"))
    return Usage(
        prompt_tokens=fresh + read + write,
        completion_tokens=output,
        cached_tokens=read,
        cache_write_tokens=write,
    )


def _count(value: Any) -> int:
    return value if _is_int(value) and value > 0 else 0


def usage_fields(usage: Usage) -> JSON:
    """``usage`` in Anthropic's shape (``input_tokens`` without the cached ones)."""
    fresh = max(0, usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens)
    return {
        "input_tokens": fresh,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "output_tokens": usage.completion_tokens,
    }


def encode_reply(reply: Reply, usage: Usage) -> JSON:
    """The canonical reply as a Messages ``message`` (the job sets id and model)."""
    content: list[JSON] = []
    for block in reply.blocks:
        if isinstance(block, Reasoning) and block.redacted is None:
            content.append(
                {"type": "thinking", "thinking": block.text, "signature": block.signature or ""}
            )
        elif isinstance(block, ToolCall):
            content.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    "input": _reply_arguments(block.arguments),
                }
            )
        elif isinstance(block, Text | Reasoning):
            content.append(_write_block(block))
    stop = STOP_TO_REASON.get(reply.stop) if reply.stop is not None else "end_turn"
    return {
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": reply.stop_sequence,
        "usage": usage_fields(usage),
    }


def _reply_arguments(arguments: str) -> Any:
    """A tool call's arguments as its input: an object, or ``{}`` for what is not one (a
    model that wrote broken JSON)."""
    try:
        value = upstream_json.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
