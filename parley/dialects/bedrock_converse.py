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
``Unsupported`` naming the field: images by URL (Converse takes bytes or S3),
``tool_choice: none`` once tools were used, and ``parallel_tool_calls: false``. ``user``
is not sent: Converse has no such field.

JSON output: a ``json_schema`` is Converse's native structured output
(``outputConfig.textFormat``, the schema as a JSON string), which the models that
support it honour alongside tools. ``json_object``, which names no schema, and
``json_schema`` on a channel that says ``structured_output: tool`` (for models without
native support) force one tool, ``JSON_TOOL``, whose input schema is the caller's schema
(an open object for ``json_object``); ``decode_reply`` and ``ConverseToChat`` turn that
tool's input back into the reply's text. A forced tool would shut out the caller's own
tools, so the two together are a 400 naming ``response_format``.

Usage: ``inputTokens`` leaves out the tokens read from or written to the prompt cache
(``cacheReadInputTokens``, ``cacheWriteInputTokens``), which ``Usage.prompt_tokens``
counts.
"""

from __future__ import annotations

from typing import Any, Literal

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
from parley.domain.usage import Usage, reported_counts
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
JSON_TOOL = "parley_json_output"
"""The tool forced to carry JSON output; its input is the reply's content."""
OPEN_OBJECT: JSON = {"type": "object"}
StructuredOutput = Literal["native", "tool"]
"""How a channel asks for ``json_schema`` output: Converse's ``outputConfig`` or a
forced tool."""


def json_tool(request: Request, structured_output: StructuredOutput = "native") -> bool:
    """Whether the call's JSON output is asked for by forcing ``JSON_TOOL``."""
    kind = request.response_format.type if request.response_format is not None else "text"
    return kind == "json_object" or (kind == "json_schema" and structured_output == "tool")


def encode_request(request: Request, structured_output: StructuredOutput = "native") -> JSON:
    """The canonical call as a Converse body; ``structured_output`` says how a
    ``json_schema`` is asked for."""
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
    if json_tool(request, structured_output):
        tools = _json_tool_config(request, tools)
    elif request.response_format is not None and request.response_format.type == "json_schema":
        body["outputConfig"] = _output_config(request.response_format.schema or {})
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


def _output_config(form: JSON) -> JSON:
    """Converse's native structured output for OpenAI's ``json_schema`` object (``name``,
    ``description``, ``schema``): the schema goes as a JSON string."""
    definition: JSON = {"schema": orjson.dumps(_schema(form)).decode()}
    for field in ("name", "description"):
        if isinstance(form.get(field), str):
            definition[field] = form[field]
    return {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": definition}}}


def _schema(form: JSON) -> JSON:
    schema = form.get("schema")
    if not isinstance(schema, dict):
        raise Unsupported(
            "'response_format.json_schema.schema' must be a JSON Schema object.",
            "response_format",
        )
    return schema


def _json_tool_config(request: Request, tools: JSON | None) -> JSON:
    """A ``toolConfig`` forcing ``JSON_TOOL``, whose input schema is the output's (an
    open object for ``json_object``)."""
    if tools is not None:
        raise Unsupported(
            "Bedrock is asked for JSON output by forcing a tool, which would shut out "
            "the request's own tools: send response_format json_schema to a model with "
            "native structured output, or leave the tools out.",
            "response_format",
        )
    form = request.response_format
    described = form.schema if form is not None and form.schema is not None else None
    schema = _schema(described) if described is not None else OPEN_OBJECT
    if schema.get("type") != "object":
        raise Unsupported(
            "Bedrock carries JSON output in a tool's input, which must be an object: the "
            "schema's type must be 'object'.",
            "response_format",
        )
    description = (described or {}).get("description")
    spec: JSON = {
        "name": JSON_TOOL,
        "description": description
        if isinstance(description, str)
        else "Give the reply: its input is the whole answer, as JSON.",
        "inputSchema": {"json": schema},
    }
    return {"tools": [{"toolSpec": spec}], "toolChoice": {"tool": {"name": JSON_TOOL}}}


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
    if block.redacted:
        return {"reasoningContent": {"redactedContent": block.redacted}}
    if not block.signature:
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


def decode_reply(reply: JSON, model: str, json_output: bool = False) -> Reply:
    """A Converse reply as the canonical reply (Converse names neither id nor model).
    ``json_output``: the call forced ``JSON_TOOL``, whose input is the reply's text."""
    output = reply.get("output")
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    blocks: list[Block] = []
    for block in content if isinstance(content, list) else ():
        found = _read_block(block)
        if json_output and isinstance(found, ToolCall) and found.name == JSON_TOOL:
            found = Text(found.arguments)
        if found is not None:
            blocks.append(found)
    reason = reply.get("stopReason")
    stop = stop_reason(reason, json_output) if isinstance(reason, str) else None
    return Reply(
        id="",
        model=model,
        blocks=tuple(blocks),
        stop=stop,
        usage=read_usage(reply.get("usage")),
    )


def stop_reason(reason: str, json_output: bool = False) -> Stop:
    """Converse's ``stopReason`` as the canonical stop; the forced ``JSON_TOOL``'s
    ``tool_use`` is the reply's natural end."""
    stop = STOP_REASONS.get(reason, "end")
    return "end" if json_output and stop == "tool_calls" else stop


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
    cache writes together. ``None`` without an input and an output count, or with any
    number that is not a count (``reported_counts`` refuses and logs it)."""
    if not isinstance(usage, dict):
        return None
    counts = reported_counts(
        {
            "inputTokens": usage.get("inputTokens"),
            "outputTokens": usage.get("outputTokens"),
            "cacheReadInputTokens": usage.get("cacheReadInputTokens"),
            "cacheWriteInputTokens": usage.get("cacheWriteInputTokens"),
        },
        source="the Bedrock upstream",
        required=("inputTokens", "outputTokens"),
    )
    if counts is None:
        return None
    read, write = counts["cacheReadInputTokens"], counts["cacheWriteInputTokens"]
    return Usage(
        prompt_tokens=counts["inputTokens"] + read + write,
        completion_tokens=counts["outputTokens"],
        cached_tokens=read,
        cache_write_tokens=write,
    )


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
