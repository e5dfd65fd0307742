"""OpenAI's Responses API as a dialect: its request read into the canonical call.

A Responses body says in ``input`` what a chat body says in ``messages``, as a list of
items: ``message`` items (``input_text``, ``input_image`` and ``output_text`` parts),
``function_call`` and ``function_call_output`` items, and ``reasoning`` items (their
text and ``encrypted_content``). ``decode_request`` reads the items (and ``instructions``,
``tools``, ``text.format``, ``reasoning.effort``...) into a ``Request``; what no upstream
behind the canonical call can do (a built-in tool such as ``web_search``, ``background``)
is an ``Unsupported`` naming the field. The reply side, the ``response`` object and its
output items, is ``responses_objects``.

``normalized_input`` rewrites ``input`` as items with ids (a string is one user
message), the form stored responses keep and ``input_items`` lists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parley.dialects.canonical import (
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
from parley.dialects.openai_chat import number_of, thinking_of
from parley.dialects.responses_objects import input_ids
from parley.domain.wire import JSON

READ = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "text",
        "max_output_tokens",
        "temperature",
        "top_p",
        "reasoning",
        "metadata",
        "store",
        "previous_response_id",
        "stream",
        "user",
        "background",
    }
)
"""The fields Parley reads."""
IGNORED = frozenset(
    {
        "include",
        "truncation",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "service_tier",
        "stream_options",
        "top_logprobs",
        "max_tool_calls",
    }
)
"""Fields that ask nothing of the generation Parley can honour or refuse: accepted and
not passed on (an upstream behind the canonical call has no such setting)."""
UNSUPPORTED = {
    "conversation": "Conversations are not supported; use 'previous_response_id'.",
    "prompt": "Stored prompts are not supported; send 'instructions' and 'input'.",
}
BUILT_IN_TOOLS = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "file_search",
        "computer_use_preview",
        "computer_use",
        "code_interpreter",
        "image_generation",
        "mcp",
        "local_shell",
        "shell",
        "apply_patch",
        "custom",
    }
)
TOOL_TYPES_NAMED = "function"


def check_fields(body: JSON) -> None:
    """A 400 for a field Parley does not know or cannot do (OpenAI's own answer to an
    unknown parameter), and for ``background: true``."""
    for name in body:
        if name in READ or name in IGNORED:
            continue
        if name in UNSUPPORTED:
            raise Unsupported(UNSUPPORTED[name], name)
        raise Unsupported(f"Unknown parameter: '{name}'.", name)
    if body.get("background"):
        raise Unsupported(
            "Background responses are not supported; call without 'background' (or stream).",
            "background",
        )


def normalized_input(value: Any, *, kept: bool = True) -> list[JSON]:
    """``input`` as a list of items, each with an ``id`` where it names no other item (a
    string is one user message; a message's string content becomes an ``input_text`` or
    ``output_text`` part). Items of other types are kept as they are: ``decode_request``
    refuses what it cannot read, a native channel takes them.

    Only a stored response's items are ever seen again, so when the response is not
    ``kept`` no ids are drawn and a plain user message (a role and a string) stays as
    it came: ``decode_request`` reads it as it reads its written form."""
    if isinstance(value, str):
        value = [{"role": "user", "content": value}]
    if not isinstance(value, list):
        raise Unsupported("'input' must be a string or an array of items.", "input")
    items: list[JSON] = []
    ids = input_ids() if kept else None
    append = items.append
    for index, item in enumerate(value):
        content = item.get("content") if item.__class__ is dict else None
        if content.__class__ is str and "role" in item and "type" not in item and "id" not in item:
            # the common case: a message of a role and a string, no more (``status`` may be)
            plain = ids is None and item.get("role") == "user"
            append(item if plain else _written_message(item, content, ids))
            continue
        if not isinstance(item, dict):
            raise Unsupported(f"'input[{index}]' must be an object.", f"input[{index}]")
        kind = item.get("type", "message" if "role" in item else None)
        written = {**item, "type": kind}
        if kind == "message":
            content = item.get("content")
            if isinstance(content, str):
                part = "output_text" if item.get("role") == "assistant" else "input_text"
                written["content"] = [{"type": part, "text": content}]
            if "status" not in item:
                written["status"] = "completed"
        elif kind == "item_reference":
            if not isinstance(item.get("id"), str):
                raise Unsupported(f"'input[{index}].id' must be a string.", f"input[{index}].id")
            items.append(written)
            continue
        if ids is not None and not item.get("id"):
            written["id"] = ids(ITEM_PREFIXES.get(str(kind), "item_"))
        items.append(written)
    return items


def _written_message(item: JSON, content: str, ids: Callable[[str], str] | None) -> JSON:
    """A message of a role and a string in its written form (an id drawn with ``ids``)."""
    part = "output_text" if item.get("role") == "assistant" else "input_text"
    written = {**item, "type": "message", "content": [{"type": part, "text": content}]}
    if "status" not in item:
        written["status"] = "completed"
    if ids is not None:
        written["id"] = ids("msg_")
    return written


ITEM_PREFIXES = {
    "message": "msg_",
    "function_call": "fc_",
    "function_call_output": "fco_",
    "reasoning": "rs_",
}


def decode_request(body: JSON, items: list[JSON]) -> Request:
    """The body, with ``items`` as its whole input (earlier turns first), as a canonical
    ``Request``; a field or item that has no canonical form is ``Unsupported``."""
    check_fields(body)
    instructions: list[Text] = []
    given = body.get("instructions")
    if isinstance(given, str) and given:
        instructions.append(Text(given))
    elif given is not None and not isinstance(given, str):
        raise Unsupported("'instructions' must be a string.", "instructions")
    messages: list[Message] = []
    said: list[Text | Image] | None = None
    """The parts of the run of plain user messages being read (the common case), made
    one message when the run ends: ``merged`` would make it one turn anyway."""
    for index, item in enumerate(items):
        content = item.get("content")
        if item.get("role") == "user":
            if content.__class__ is str and "type" not in item:  # as it came, not kept
                text = content
            elif (
                item.get("type") == "message"
                and content.__class__ is list
                and len(content) == 1
                and content[0].__class__ is dict
                and content[0].get("type") == "input_text"
            ):
                text = str(content[0].get("text") or "")
            else:
                text = None
            if text is not None:
                if said is None:
                    said = []
                said.append(Text(text))
                continue
        if said is not None:
            messages.append(Message("user", tuple(said)))
            said = None
        _read_item(item, index, instructions, messages)
    if said is not None:
        messages.append(Message("user", tuple(said)))
    # An absent field is read here, not by its reader: most bodies hold few of them.
    get = body.get
    tools, choice, parallel = get("tools"), get("tool_choice"), get("parallel_tool_calls")
    text, reasoning = get("text"), get("reasoning")
    no_choice = choice is None and parallel is None
    return Request(  # positionally, in its fields' order (docs/performance.md, Speed habits)
        str(get("model", "")),
        tuple(merged(messages)),
        tuple(instructions),
        () if tools is None else _tools(tools),
        None if no_choice else _tool_choice(choice, parallel),
        _positive(body, "max_output_tokens"),
        number_of(body, "temperature"),
        number_of(body, "top_p"),
        None,  # top_k: not in OpenAI's dialect
        (),  # stop: not in the Responses API
        None if text is None else _format(text),  # response_format
        None if reasoning is None else _thinking(reasoning),
        _user(body),
        bool(get("stream")),
    )


def _read_item(item: JSON, index: int, instructions: list[Text], messages: list[Message]) -> None:
    """One input item read into ``messages`` (or ``instructions``). Where an error is
    (``input[3].role``) is written only for the error: a body may hold a million items."""
    kind = item.get("type")
    if kind == "message":
        role = item.get("role")
        blocks = _parts(item.get("content"), index)
        if role in ("system", "developer"):
            instructions.extend(block for block in blocks if isinstance(block, Text))
        elif role in ("user", "assistant"):
            messages.append(Message(role, blocks))
        else:
            where = f"input[{index}].role"
            raise Unsupported(f"The role '{role}' is not one a message can have.", where)
    elif kind == "function_call":
        name, call_id = item.get("name"), item.get("call_id")
        if not isinstance(name, str) or not isinstance(call_id, str):
            where = f"input[{index}]"
            raise Unsupported(f"'{where}' must have a 'name' and a 'call_id'.", where)
        arguments = item.get("arguments")
        text = arguments if isinstance(arguments, str) and arguments else "{}"
        messages.append(Message("assistant", (ToolCall(call_id, name, text),)))
    elif kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str):
            where = f"input[{index}].call_id"
            raise Unsupported(f"'{where}' must be a string.", where)
        output = item.get("output")
        content = (Text(output),) if isinstance(output, str) else _parts(output, index, ".output")
        messages.append(Message("user", (ToolResult(call_id, content),)))
    elif kind == "reasoning":
        messages.append(Message("assistant", (_reasoning(item),)))
    else:
        where = f"input[{index}].type"
        raise Unsupported(f"Input items of type '{kind}' are not supported.", where)


def _reasoning(item: JSON) -> Reasoning:
    texts = [
        str(part.get("text", ""))
        for part in item.get("content") or item.get("summary") or ()
        if isinstance(part, dict)
    ]
    encrypted = item.get("encrypted_content")
    return Reasoning("".join(texts), redacted=encrypted if isinstance(encrypted, str) else None)


def _parts(content: Any, item: int, field: str = "") -> tuple[Text | Image, ...]:
    """The parts of ``input[item]`` (its ``field``, ``.output``, when given)."""
    if content is None:
        return ()
    if isinstance(content, str):
        return (Text(content),) if content else ()
    if not isinstance(content, list):
        where = f"input[{item}]{field}.content"
        raise Unsupported(f"'{where}' must be a string or an array.", where)
    blocks: list[Text | Image] = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in TEXT_PARTS:
            assert isinstance(part, dict)
            text = part.get("refusal") if kind == "refusal" else part.get("text")
            blocks.append(Text(str(text or "")))
        elif kind == "input_image":
            assert isinstance(part, dict)
            blocks.append(_image(part, f"input[{item}]{field}.content[{index}]"))
        else:
            where = f"input[{item}]{field}.content[{index}].type"
            raise Unsupported(f"Content of type '{kind}' is not supported.", where)
    return tuple(blocks)


TEXT_PARTS = ("input_text", "output_text", "text", "refusal")
"""Part types read as text (a tuple: a caller's `type` may be a list, which no set can hold)."""


def _image(part: JSON, where: str) -> Image:
    url = part.get("image_url")
    if not isinstance(url, str):
        raise Unsupported(
            "An input_image needs an 'image_url' (uploaded files are not supported).",
            f"{where}.image_url",
        )
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        return Image(media_type=header[5:].partition(";")[0] or "image/png", data=data)
    return Image(url=url)


def _tools(tools: Any) -> tuple[Tool, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise Unsupported("'tools' must be an array.", "tools")
    found: list[Tool] = []
    for index, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if not isinstance(kind, str):
            raise Unsupported(
                f"Each tool needs a 'type' ('function' here); tools[{index}] has none.",
                f"tools[{index}].type",
            )
        if kind != TOOL_TYPES_NAMED:
            named = f"The built-in tool '{kind}'" if kind in BUILT_IN_TOOLS else f"'{kind}'"
            raise Unsupported(
                f"{named} is not supported here; only 'function' tools are.",
                f"tools[{index}].type",
            )
        assert isinstance(tool, dict)
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise Unsupported(f"'tools[{index}].name' must be a string.", f"tools[{index}].name")
        parameters = tool.get("parameters")
        description = tool.get("description")
        found.append(
            Tool(
                name=name,
                description=description if isinstance(description, str) else None,
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
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "function" and isinstance(choice.get("name"), str):
        return ToolChoice("tool", choice["name"], parallel=allowed)
    raise Unsupported(f"The tool_choice '{kind or choice}' is not supported.", "tool_choice")


def _format(text: Any) -> ResponseFormat | None:
    if text is None:
        return None
    form = text.get("format") if isinstance(text, dict) else None
    if form is None:
        return None
    kind = form.get("type") if isinstance(form, dict) else None
    if kind in ("text", "json_object"):
        return ResponseFormat(kind)
    if kind == "json_schema":
        assert isinstance(form, dict)
        schema = form.get("schema")
        if not isinstance(schema, dict):
            raise Unsupported("'text.format.schema' must be an object.", "text.format.schema")
        written: JSON = {"name": str(form.get("name") or "response"), "schema": schema}
        for name in ("strict", "description"):
            if form.get(name) is not None:
                written[name] = form[name]
        return ResponseFormat("json_schema", written)
    raise Unsupported(f"The text.format type '{kind}' is unknown.", "text.format.type")


def _thinking(reasoning: Any) -> Thinking | None:
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    return thinking_of(effort, "reasoning.effort", "reasoning effort")


def _user(body: JSON) -> str | None:
    user = body.get("user") or body.get("safety_identifier")
    return user if isinstance(user, str) else None


def _positive(body: JSON, name: str) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise Unsupported(f"'{name}' must be a positive integer.", name)
    return value
