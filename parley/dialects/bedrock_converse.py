"""Amazon Bedrock's Converse API as a dialect: the canonical call to its body, its
reply back.

``encode_request`` writes a ``Request`` as a Converse body (the model goes in the URL):
``system`` and ``messages`` of content blocks (``text``, ``image`` with its bytes in
base64, ``toolUse``, ``toolResult``, ``reasoningContent``), ``inferenceConfig``
(``maxTokens``, ``temperature``, ``topP``, ``stopSequences``) and ``toolConfig``
(``tools`` and ``toolChoice``). A block carrying Anthropic's ``cache_control`` is
followed by a ``cachePoint``. ``top_k`` and extended thinking have no Converse field
and go in ``additionalModelRequestFields`` in Anthropic's spelling (Claude models read
them there; other models refuse them with a 400). What Converse cannot say is an
``Unsupported`` naming the field: images by URL (Converse takes bytes or S3), JSON
output (``response_format``), ``tool_choice: none`` once tools were used, and
``parallel_tool_calls: false``. ``user`` is not sent: Converse has no such field.

Usage: ``inputTokens`` leaves out the tokens read from or written to the prompt cache
(``cacheReadInputTokens``, ``cacheWriteInputTokens``), which ``Usage.prompt_tokens``
counts.
"""

from __future__ import annotations

from typing import Any

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
    Tool,
    ToolCall,
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
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    "model_context_window_exceeded": "length",
}
IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
CACHE_POINT: JSON = {"cachePoint": {"type": "default"}}


def encode_request(request: Request) -> JSON:
    """The canonical call as a Converse body."""
    if request.response_format is not None and request.response_format.type != "text":
        raise Unsupported(
            "Bedrock's Converse API takes no response_format; describe the JSON in the "
            "prompt, or use a tool whose parameters are the schema.",
            "response_format",
        )
    body: JSON = {"messages": [_write_message(message) for message in request.messages]}
    if request.instructions:
        body["system"] = _with_cache_points(request.instructions)
    config: JSON = {}
    if request.max_output_tokens is not None:
        config["maxTokens"] = request.max_output_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.top_p is not None:
        config["topP"] = request.top_p
    if request.stop:
        config["stopSequences"] = list(request.stop)
    if config:
        body["inferenceConfig"] = config
    tools = _tool_config(request)
    if tools is not None:
        body["toolConfig"] = tools
    extra: JSON = {}
    if request.top_k is not None:
        extra["top_k"] = request.top_k
    thinking = request.thinking
    if thinking is not None and thinking.enabled:
        budget = thinking.budget_tokens or 1024
        extra["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if extra:
        body["additionalModelRequestFields"] = extra
    return body


def _tool_config(request: Request) -> JSON | None:
    choice = request.tool_choice
    used = any(
        isinstance(block, ToolCall | ToolResult)
        for message in request.messages
        for block in message.blocks
    )
    if choice is not None and choice.parallel is False:
        raise Unsupported(
            "Bedrock's Converse API cannot forbid parallel tool calls.", "parallel_tool_calls"
        )
    if not request.tools:
        if used:
            raise Unsupported(
                "Bedrock needs the tools' definitions in a conversation that used tools.",
                "tools",
            )
        return None
    if choice is not None and choice.mode == "none":
        if used:
            raise Unsupported(
                "Bedrock's Converse API cannot turn tools off in a conversation that used "
                "them; leave tool_choice out.",
                "tool_choice",
            )
        return None
    config: JSON = {"tools": _write_tools(request.tools)}
    if choice is not None and choice.mode == "required":
        config["toolChoice"] = {"any": {}}
    elif choice is not None and choice.mode == "tool":
        config["toolChoice"] = {"tool": {"name": choice.name}}
    elif choice is not None:
        config["toolChoice"] = {"auto": {}}
    return config


def _write_tools(tools: tuple[Tool, ...]) -> list[JSON]:
    written: list[JSON] = []
    for tool in tools:
        spec: JSON = {"name": tool.name, "inputSchema": {"json": tool.parameters}}
        if tool.description is not None:
            spec["description"] = tool.description
        written.append({"toolSpec": spec})
        if tool.cache is not None:
            written.append(CACHE_POINT)
    return written


def _with_cache_points(blocks: tuple[Text, ...]) -> list[JSON]:
    written: list[JSON] = []
    for block in blocks:
        written.append({"text": block.text})
        if block.cache is not None:
            written.append(CACHE_POINT)
    return written


def _write_message(message: Message) -> JSON:
    content: list[JSON] = []
    for block in message.blocks:
        written = _write_block(block)
        if written:
            content.append(written)
            if getattr(block, "cache", None) is not None:
                content.append(CACHE_POINT)
    return {"role": message.role, "content": content}


def _write_block(block: Block) -> JSON:
    if isinstance(block, Text):
        return {"text": block.text}
    if isinstance(block, Image):
        return {"image": _write_image(block)}
    if isinstance(block, ToolCall):
        return {"toolUse": {"toolUseId": block.id, "name": block.name, "input": _input(block)}}
    if isinstance(block, ToolResult):
        parts = [_write_block(part) for part in block.content]
        result: JSON = {"toolUseId": block.call_id, "content": parts}
        if block.is_error:
            result["status"] = "error"
        return {"toolResult": result}
    if block.redacted is not None:
        return {"reasoningContent": {"redactedContent": block.redacted}}
    if block.signature is None:
        return {}  # reasoning without a signature (another model's) cannot go back
    text: JSON = {"text": block.text, "signature": block.signature}
    return {"reasoningContent": {"reasoningText": text}}


def _write_image(image: Image) -> JSON:
    if image.data is None:
        raise Unsupported(
            "Bedrock takes images by value: send a data: URL (base64), not a link.",
            "messages",
        )
    kind = IMAGE_FORMATS.get((image.media_type or "").lower())
    if kind is None:
        raise Unsupported(
            f"Bedrock takes PNG, JPEG, GIF and WebP images, not '{image.media_type}'.",
            "messages",
        )
    return {"format": kind, "source": {"bytes": image.data}}


def _input(call: ToolCall) -> Any:
    try:
        value = orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError:
        raise Unsupported("A tool call's arguments must be a JSON object.", "tool_calls") from None
    if not isinstance(value, dict):
        raise Unsupported("A tool call's arguments must be a JSON object.", "tool_calls")
    return value


def decode_reply(reply: JSON, model: str) -> Reply:
    """A Converse reply as the canonical reply (Converse names neither id nor model)."""
    output = reply.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    blocks: list[Block] = []
    for block in content if isinstance(content, list) else ():
        found = _read_block(block)
        if found is not None:
            blocks.append(found)
    reason = reply.get("stopReason")
    return Reply(
        id="",
        model=model,
        blocks=tuple(blocks),
        stop=STOP_REASONS.get(reason, "end") if isinstance(reason, str) else None,
        usage=read_usage(reply.get("usage")),
    )


def _read_block(block: Any) -> Block | None:
    if not isinstance(block, dict):
        return None
    if isinstance(block.get("text"), str):
        return Text(block["text"])
    use = block.get("toolUse")
    if isinstance(use, dict):
        arguments = orjson.dumps(use.get("input") or {}).decode()
        return ToolCall(str(use.get("toolUseId") or ""), str(use.get("name") or ""), arguments)
    reasoning = block.get("reasoningContent")
    if isinstance(reasoning, dict):
        text = reasoning.get("reasoningText")
        if isinstance(text, dict):
            signature = text.get("signature")
            return Reasoning(
                str(text.get("text") or ""),
                signature=signature if isinstance(signature, str) else None,
            )
        redacted = reasoning.get("redactedContent")
        if isinstance(redacted, str):
            return Reasoning(redacted=redacted)
    return None


def read_usage(usage: Any) -> Usage | None:
    """Converse's ``usage`` as ``Usage``: ``prompt_tokens`` is input, cache reads and
    cache writes together. ``None`` without an input and an output count."""
    if not isinstance(usage, dict):
        return None
    counted = reported_usage(
        usage, source="the Bedrock upstream", prompt="inputTokens", completion="outputTokens"
    )
    if counted is None:
        return None
    read = _count(usage.get("cacheReadInputTokens"))
    write = _count(usage.get("cacheWriteInputTokens"))
    return Usage(
        prompt_tokens=counted.prompt_tokens + read + write,
        completion_tokens=counted.completion_tokens,
        cached_tokens=read,
        cache_write_tokens=write,
    )


def _count(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def error_message(raw: bytes) -> str | None:
    """The ``message`` of a Bedrock error body (``{"message": ...}``, or ``Message``)."""
    try:
        body = upstream_json.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return None
    message = body.get("message", body.get("Message"))
    return message if isinstance(message, str) and message.strip() else None
