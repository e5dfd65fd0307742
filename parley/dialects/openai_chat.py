"""OpenAI chat completions as a dialect: its request bodies to the canonical call and back.

``decode_request`` reads a caller's (already checked) chat body into a ``Request``, for
an upstream of another dialect; ``encode_request`` writes a ``Request`` as a chat body,
for an OpenAI-compatible upstream. The reply half (``chat.completion`` objects, usage,
finish reasons) is ``openai_chat_reply``.

An assistant message's reasoning is read from ``thinking_blocks`` (signed or redacted
thinking, which Claude needs back in a tool loop with thinking on: see
``openai_chat_reply``) or else ``reasoning_content``, and comes before its text and
tool calls. ``encode_request`` writes no reasoning: an OpenAI-compatible upstream may
refuse a field it does not know, and every other upstream is written from the canonical
call itself, signatures and all.
"""

from __future__ import annotations

from typing import Any

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
    merged,
)
from parley.dialects.openai_chat_reply import read_thinking_blocks
from parley.domain.tokens import (
    CHARS_PER_TOKEN,
    TOKENS_PER_IMAGE,
    TOKENS_PER_MESSAGE,
)
from parley.domain.wire import JSON

IGNORED = frozenset({"model", "messages", "stream", "stream_options", "store", "service_tier"})
"""Fields that are not part of the generation (or are Parley's to set)."""
NEUTRAL = {
    "n": 1,
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "logprobs": False,
    "seed": None,
    "logit_bias": None,
    "top_logprobs": None,
    "modalities": None,
    "audio": None,
    "prediction": None,
    "web_search_options": None,
    "metadata": None,
    "function_call": None,
    "functions": None,
}
"""Fields another dialect cannot say, accepted only with the value that asks nothing."""
REASONING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
"""``reasoning_effort`` → a thinking budget, and back (the nearest level at or above)."""


def decode_request(body: JSON) -> Request:
    """A chat body as the canonical call; a field that has no canonical form is a 400."""
    for name, value in body.items():
        if name in IGNORED or name in _READERS:
            continue
        if name in NEUTRAL and value in (NEUTRAL[name], None, [], {}):
            continue
        raise Unsupported(
            f"The field '{name}' cannot be sent to this model's upstream.", param=name
        )
    instructions: list[Text] = []
    messages: list[Message] = []
    said: list[Text] | None = None
    """The text of the run of plain user messages being read (the common case), made
    one message when the run ends: ``merged`` would make it one turn anyway."""
    for index, message in enumerate(body.get("messages") or ()):
        content = message.get("content")
        if content.__class__ is str and message.get("role") == "user":
            if said is None:
                said = []
            if content:
                said.append(Text(content))
            continue
        if said is not None:
            messages.append(Message("user", tuple(said)))
            said = None
        _read_message(message, index, instructions, messages)
    if said is not None:
        messages.append(Message("user", tuple(said)))
    return Request(
        model=str(body.get("model", "")),
        messages=tuple(merged(messages)),
        instructions=tuple(instructions),
        tools=_tools(body.get("tools")),
        tool_choice=_tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls")),
        max_output_tokens=_int(body, "max_completion_tokens") or _int(body, "max_tokens"),
        temperature=number_of(body, "temperature"),
        top_p=number_of(body, "top_p"),
        top_k=_int(body, "top_k"),
        stop=_stop(body.get("stop")),
        response_format=_response_format(body.get("response_format")),
        thinking=thinking_of(body.get("reasoning_effort"), "reasoning_effort", "reasoning_effort"),
        user=body.get("user") if isinstance(body.get("user"), str) else None,
        stream=bool(body.get("stream")),
    )


_READERS = frozenset(
    {
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop",
        "response_format",
        "reasoning_effort",
        "user",
    }
)


def _read_message(
    message: JSON, index: int, instructions: list[Text], messages: list[Message]
) -> None:
    role = message.get("role")
    content = message.get("content")
    where = f"messages[{index}]"
    if role in ("system", "developer"):
        instructions.extend(block for block in _content(content, where) if isinstance(block, Text))
        return
    if role == "user":
        messages.append(Message("user", _content(content, where)))
    elif role == "assistant":
        blocks = [*_reasoning(message), *_content(content, where)]
        for position, call in enumerate(message.get("tool_calls") or ()):
            blocks.append(_tool_call(call, f"{where}.tool_calls[{position}]"))
        messages.append(Message("assistant", tuple(blocks)))
    elif role == "tool":
        result = ToolResult(str(message.get("tool_call_id") or ""), _content(content, where))
        messages.append(Message("user", (result,)))
    else:
        raise Unsupported(f"The role '{role}' cannot be sent to this upstream.", f"{where}.role")


def _reasoning(message: JSON) -> list[Block]:
    signed = read_thinking_blocks(message.get("thinking_blocks"))
    if signed:
        return list(signed)
    text = message.get("reasoning_content")
    return [Reasoning(text)] if isinstance(text, str) and text else []


def _content(content: Any, where: str) -> tuple[Text | Image, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),) if content else ()
    blocks: list[Text | Image] = []
    for index, part in enumerate(content):
        kind = part.get("type")
        if kind == "text":
            blocks.append(Text(str(part.get("text", ""))))
        elif kind == "image_url":
            blocks.append(_image(part.get("image_url"), f"{where}.content[{index}]"))
        else:
            raise Unsupported(
                f"Content of type '{kind}' cannot be sent to this upstream.",
                f"{where}.content[{index}].type",
            )
    return tuple(blocks)


def _image(image: Any, where: str) -> Image:
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise Unsupported(f"'{where}.image_url.url' must be a URL.", where)
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        media_type = header[5:].partition(";")[0] or "image/png"
        return Image(media_type=media_type, data=data)
    return Image(url=url)


def _tool_call(call: Any, where: str) -> ToolCall:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise Unsupported(f"'{where}' must be a function call with a name.", where)
    arguments = function.get("arguments") or "{}"
    return ToolCall(str(call.get("id") or ""), function["name"], str(arguments))


def _tools(tools: Any) -> tuple[Tool, ...]:
    found: list[Tool] = []
    for index, tool in enumerate(tools or ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        if tool.get("type") != "function" or not isinstance(function, dict):
            raise Unsupported(
                "Only function tools can be sent to this upstream.", f"tools[{index}]"
            )
        parameters = function.get("parameters")
        found.append(
            Tool(
                name=str(function.get("name", "")),
                description=function.get("description"),
                parameters=parameters if isinstance(parameters, dict) else {"type": "object"},
            )
        )
    return tuple(found)


def _tool_choice(choice: Any, parallel: Any) -> ToolChoice | None:
    allowed = None if parallel is None else bool(parallel)
    if choice is None:
        return ToolChoice("auto", parallel=allowed) if allowed is not None else None
    if choice in ("auto", "none", "required"):
        return ToolChoice(choice, parallel=allowed)
    function = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        return ToolChoice("tool", function["name"], parallel=allowed)
    raise Unsupported("'tool_choice' is not one this upstream understands.", "tool_choice")


def _stop(stop: Any) -> tuple[str, ...]:
    if isinstance(stop, str):
        return (stop,)
    return tuple(str(item) for item in stop or ())


def _response_format(value: Any) -> ResponseFormat | None:
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if kind == "json_schema":
        schema = value.get("json_schema")
        return ResponseFormat("json_schema", schema if isinstance(schema, dict) else None)
    if kind in ("text", "json_object"):
        return ResponseFormat(kind)
    raise Unsupported(f"The response_format type '{kind}' is unknown.", "response_format")


def thinking_of(effort: Any, param: str, label: str) -> Thinking | None:
    """The canonical thinking an OpenAI reasoning effort asks for: ``none`` turns it off,
    a known effort is its budget (``REASONING_BUDGETS``); an unknown one is refused,
    named ``label`` in the message and ``param`` in the error."""
    if effort is None:
        return None
    if effort == "none":
        return Thinking(enabled=False)
    budget = REASONING_BUDGETS.get(str(effort))
    if budget is None:
        raise Unsupported(f"The {label} '{effort}' is unknown.", param)
    return Thinking(enabled=True, budget_tokens=budget)


def _int(body: JSON, name: str) -> int | None:
    value = body.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number_of(body: JSON, name: str) -> float | None:
    """The body's field ``name`` when it is a number (a bool is not), else ``None``."""
    value = body.get(name)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def encode_request(request: Request, model: str) -> JSON:
    """The canonical call as a chat body for an OpenAI-compatible upstream (which may
    refuse a field it does not know, so signed reasoning is not written)."""
    body: JSON = {"model": model, "messages": _write_messages(request)}
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    for name in ("temperature", "top_p", "top_k", "user"):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    if request.stop:
        body["stop"] = list(request.stop)
    if request.tools:
        body["tools"] = [_write_tool(tool) for tool in request.tools]
    if request.tool_choice is not None:
        _write_tool_choice(request.tool_choice, body)
    if request.response_format is not None:
        body["response_format"] = _write_format(request.response_format)
    if request.thinking is not None and request.thinking.enabled:
        body["reasoning_effort"] = effort_for(request.thinking.budget_tokens)
    if request.stream:
        body["stream"] = True
    return body


def _write_messages(request: Request) -> list[JSON]:
    messages: list[JSON] = []
    if request.instructions:
        text = "\n\n".join(block.text for block in request.instructions)
        messages.append({"role": "system", "content": text})
    for index, message in enumerate(request.messages):
        blocks = message.blocks
        if message.role == "user" and len(blocks) == 1 and blocks[0].__class__ is Text:
            messages.append({"role": "user", "content": blocks[0].text})  # the common case
        else:
            messages.extend(_write_message(message, index))
    return messages


def effort_for(budget: int | None) -> str:
    """The ``reasoning_effort`` whose budget is the nearest at or above ``budget``."""
    for effort, tokens in REASONING_BUDGETS.items():
        if budget is not None and budget <= tokens:
            return effort
    return "high"


def _write_message(message: Message, index: int) -> list[JSON]:
    if message.role == "assistant":
        return [_write_assistant(message)]
    written: list[JSON] = []
    parts: list[JSON] = []
    for position, block in enumerate(message.blocks):
        if block.__class__ is Text:  # the common case, without the tests below
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ToolResult):
            written.append(_write_result(block, f"messages[{index}].content[{position}]"))
        elif isinstance(block, Text | Image):
            parts.append(_write_part(block))
        else:
            where = f"messages[{index}].content[{position}]"
            raise Unsupported("A user message cannot hold this block here.", where)
    if parts:
        plain = all(part["type"] == "text" for part in parts)
        content: Any = "".join(p["text"] for p in parts) if plain and len(parts) == 1 else parts
        written.append({"role": "user", "content": content})
    return written


def _write_assistant(message: Message) -> JSON:
    texts = [block.text for block in message.blocks if isinstance(block, Text)]
    calls = [block for block in message.blocks if isinstance(block, ToolCall)]
    written: JSON = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        written["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ]
    return written


def _write_result(result: ToolResult, where: str) -> JSON:
    texts: list[str] = []
    for block in result.content:
        if not isinstance(block, Text):
            raise Unsupported(
                "A tool result sent to an OpenAI-compatible upstream can hold text only.", where
            )
        texts.append(block.text)
    return {"role": "tool", "tool_call_id": result.call_id, "content": "".join(texts)}


def _write_part(block: Text | Image) -> JSON:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    url = block.url or f"data:{block.media_type};base64,{block.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _write_tool(tool: Tool) -> JSON:
    function: JSON = {"name": tool.name, "parameters": tool.parameters}
    if tool.description is not None:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _write_tool_choice(choice: ToolChoice, body: JSON) -> None:
    if choice.mode == "tool":
        body["tool_choice"] = {"type": "function", "function": {"name": choice.name}}
    else:
        body["tool_choice"] = choice.mode
    if choice.parallel is not None and body.get("tools"):
        body["parallel_tool_calls"] = choice.parallel


def _write_format(form: ResponseFormat) -> JSON:
    if form.type == "json_schema":
        return {"type": "json_schema", "json_schema": form.schema or {}}
    return {"type": form.type}


def estimate_messages(messages: list[Any]) -> int:
    """The prompt's tokens, estimated from chat ``messages``: a few of framing a message,
    a token per four characters of text, a fixed count per image."""
    return read_messages(messages)[0]


def count_images(messages: list[Any]) -> int:
    """The image parts in chat messages."""
    return read_messages(messages)[1]


def read_messages(messages: list[Any]) -> tuple[int, int]:
    """The prompt's estimate for chat ``messages`` and the image parts in them, in one
    pass: a message whose content is a string (the common case) costs one lookup."""
    total = 3 + TOKENS_PER_MESSAGE * len(messages)
    images = 0
    for message in messages:
        if message.__class__ is not dict:
            continue
        content = message.get("content")
        if content.__class__ is str:
            total += (len(content) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
        elif content.__class__ is list:
            estimate, found = read_content(content)
            total += estimate
            images += found
    return total, images


def read_content(content: list[Any]) -> tuple[int, int]:
    """A message's parts: their estimate and how many are images, in one pass."""
    total = images = 0
    for part in content:
        if part.__class__ is not dict:
            continue
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if text.__class__ is str:
                total += (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
        elif kind == "image_url":
            total += TOKENS_PER_IMAGE
            images += 1
    return total, images
