"""Google's ``generateContent`` (Gemini API and Vertex AI) as a dialect: the canonical call
written as its body, and its replies read back.

``encode_request`` writes a ``Request`` as a ``GenerateContentRequest``: roles ``user``
and ``model``, the instructions as ``systemInstruction``, blocks as ``parts`` (text,
``inlineData`` images, ``functionCall`` and ``functionResponse``), tools as
``functionDeclarations`` (their JSON Schema as ``parametersJsonSchema``), the sampling,
limits, stop sequences, JSON output (``responseMimeType``/``responseJsonSchema``) and
thinking in ``generationConfig``. What Gemini cannot say is an ``Unsupported`` naming
the field: an image by URL where the upstream cannot fetch one, an image in a tool
result.

**Tool call ids.** Gemini's calls carry no id (or an optional one): a reply's calls get
ids made from the response id and their position (``call_<responseId>_<n>``), the
upstream's own when it sent one, and a tool result goes back as a ``functionResponse``
named after the call it answers, found by id among the request's earlier calls; Gemini
pairs them by name and order. Thinking models sign a call (``thoughtSignature``) and
refuse a later turn whose call lost its signature, and no caller dialect has a field for
it: the signature rides in the call's id (``<id>__sig_<signature>``, base64 in the
characters ids allow), which every caller sends back, and is put back on the
``functionCall`` part from there.

``decode_reply`` reads a ``GenerateContentResponse`` (its first candidate); ``read_usage``
its ``usageMetadata``: ``promptTokenCount`` counts cached content too (OpenAI's
convention, so ``cachedContentTokenCount`` is the cached part of it), and the output is
``candidatesTokenCount`` plus ``thoughtsTokenCount``, the latter told apart as reasoning.
"""

from __future__ import annotations

import mimetypes
import uuid
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
from parley.domain.usage import Usage, reported_counts
from parley.domain.wire import JSON

FINISH_REASONS: dict[str, Stop] = {
    "STOP": "end",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}
"""Gemini's ``finishReason`` → the canonical stop (anything else ends as ``end``)."""
TOOL_MODES = {"auto": "AUTO", "required": "ANY", "tool": "ANY", "none": "NONE"}
SIGNATURE_MARK = "__sig_"
"""Between a call's id and the thought signature it carries (see the module's doc)."""


def encode_request(request: Request, *, remote_images: bool = False) -> JSON:
    """The canonical call as a ``GenerateContentRequest`` (the model is in the URL).
    ``remote_images``: the upstream fetches images by URL (Vertex AI); otherwise only
    images by value (data URLs) and Google's own file URIs can be sent."""
    names = {
        block.id: block.name
        for message in request.messages
        for block in message.blocks
        if isinstance(block, ToolCall)
    }
    contents = [
        _write_message(message, index, names, remote_images)
        for index, message in enumerate(request.messages)
    ]
    body: JSON = {"contents": [content for content in contents if content["parts"]]}
    if request.instructions:
        body["systemInstruction"] = {
            "parts": [{"text": block.text} for block in request.instructions]
        }
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_write_tool(tool) for tool in request.tools]}]
    choice = request.tool_choice
    if choice is not None and request.tools:
        config: JSON = {"mode": TOOL_MODES[choice.mode]}
        if choice.mode == "tool":
            config["allowedFunctionNames"] = [choice.name]
        body["toolConfig"] = {"functionCallingConfig": config}
    generation = _generation_config(request)
    if generation:
        body["generationConfig"] = generation
    return body


def _write_message(
    message: Message, index: int, names: dict[str, str], remote_images: bool
) -> JSON:
    parts: list[JSON] = []
    for position, block in enumerate(message.blocks):
        where = f"messages[{index}].content[{position}]"
        if isinstance(block, Text):
            if block.text:
                parts.append({"text": block.text})
        elif isinstance(block, Image):
            parts.append(_write_image(block, where, remote_images))
        elif isinstance(block, ToolCall):
            call: JSON = {"functionCall": {"name": block.name, "args": _arguments(block)}}
            signature = _signature(block.id)
            if signature:
                call["thoughtSignature"] = signature
            parts.append(call)
        elif isinstance(block, ToolResult):
            parts.append(_write_result(block, names, where))
        # Reasoning: Gemini's thoughts cannot be sent back; the model does without them.
    return {"role": "model" if message.role == "assistant" else "user", "parts": parts}


def _write_image(image: Image, where: str, remote_images: bool) -> JSON:
    if image.data is not None:
        return {"inlineData": {"mimeType": image.media_type or "image/png", "data": image.data}}
    url = image.url or ""
    google_file = url.startswith(("gs://", "https://generativelanguage.googleapis.com/"))
    if not (google_file or (remote_images and url.startswith(("http://", "https://")))):
        raise Unsupported(
            "This model's upstream takes images inline: send the image as a data URL "
            "(data:image/png;base64,...).",
            where,
        )
    mime_type = mimetypes.guess_type(url.partition("?")[0])[0]
    if mime_type is None or not mime_type.startswith("image/"):
        raise Unsupported(
            "The image URL must end in a known image extension (.png, .jpg, .webp...) "
            "for this model's upstream, or be sent as a data URL.",
            where,
        )
    return {"fileData": {"mimeType": mime_type, "fileUri": url}}


def _arguments(call: ToolCall) -> JSON:
    try:
        value = orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError:
        raise Unsupported("A tool call's arguments must be a JSON object.", "tool_calls") from None
    if not isinstance(value, dict):
        raise Unsupported("A tool call's arguments must be a JSON object.", "tool_calls")
    return value


def _write_result(result: ToolResult, names: dict[str, str], where: str) -> JSON:
    name = names.get(result.call_id)
    if name is None:
        raise Unsupported(
            f"The tool result for '{result.call_id}' answers no tool call of an earlier "
            "assistant message.",
            where,
        )
    texts: list[str] = []
    for block in result.content:
        if not isinstance(block, Text):
            raise Unsupported("A tool result sent to this upstream can hold text only.", where)
        texts.append(block.text)
    text = "".join(texts)
    response: JSON = {"error" if result.is_error else "output": _result_value(text)}
    return {"functionResponse": {"name": name, "response": response}}


def _result_value(text: str) -> Any:
    """A tool's output as the value it is when it is JSON text, else the text."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _write_tool(tool: Tool) -> JSON:
    written: JSON = {"name": tool.name, "parametersJsonSchema": tool.parameters}
    if tool.description is not None:
        written["description"] = tool.description
    return written


def _generation_config(request: Request) -> JSON:
    config: JSON = {}
    for name, key in (("temperature", "temperature"), ("top_p", "topP"), ("top_k", "topK")):
        value = getattr(request, name)
        if value is not None:
            config[key] = value
    if request.max_output_tokens is not None:
        config["maxOutputTokens"] = request.max_output_tokens
    if request.stop:
        if len(request.stop) > 5:
            raise Unsupported("This model's upstream takes at most 5 stop sequences.", "stop")
        config["stopSequences"] = list(request.stop)
    form = request.response_format
    if form is not None and form.type != "text":
        config["responseMimeType"] = "application/json"
        if form.type == "json_schema":
            schema = (form.schema or {}).get("schema")
            if not isinstance(schema, dict):
                raise Unsupported(
                    "'response_format.json_schema.schema' must be a JSON Schema object.",
                    "response_format",
                )
            config["responseJsonSchema"] = schema
    thinking = request.thinking
    if thinking is not None:
        budget = (thinking.budget_tokens or -1) if thinking.enabled else 0
        config["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": thinking.enabled}
    return config


def decode_reply(reply: JSON, model: str = "") -> Reply:
    """A ``GenerateContentResponse`` as the canonical reply (its first candidate). A
    prompt blocked before any candidate (``promptFeedback.blockReason``) is a
    ``content_filter`` stop with nothing said."""
    response_id = str(reply.get("responseId") or "")
    candidates = reply.get("candidates")
    candidate = candidates[0] if isinstance(candidates, list) and candidates else {}
    candidate = candidate if isinstance(candidate, dict) else {}
    blocks: list[Block] = []
    calls = 0
    for part in parts_of(candidate):
        block = read_part(part, response_id, calls)
        if isinstance(block, ToolCall):
            calls += 1
        if block is not None:
            blocks.append(block)
    return Reply(
        id=response_id,
        model=str(reply.get("modelVersion") or model),
        blocks=tuple(blocks),
        stop=stop_of(reply, candidate, bool(calls)),
        usage=read_usage(reply.get("usageMetadata")),
    )


def parts_of(candidate: JSON) -> list[JSON]:
    """The candidate's parts that are objects."""
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return [part for part in parts or () if isinstance(part, dict)]


def read_part(part: JSON, response_id: str, position: int) -> Block | None:
    """One part as a block: text, a thought (reasoning) or a function call (the
    ``position``-th of the reply); ``None`` for parts with no canonical form."""
    text = part.get("text")
    if isinstance(text, str):
        return Reasoning(text) if part.get("thought") is True else Text(text)
    call = part.get("functionCall")
    if isinstance(call, dict):
        arguments = orjson.dumps(call.get("args") or {}).decode()
        identity = call_id(call, response_id, position)
        signature = part.get("thoughtSignature")
        if isinstance(signature, str) and signature:
            identity += SIGNATURE_MARK + _pack(signature)
        return ToolCall(identity, str(call.get("name")), arguments)
    return None


def _pack(signature: str) -> str:
    """A base64 signature in an id's characters (``[A-Za-z0-9_-]``, as Anthropic's
    ``tool_use`` ids must be)."""
    return signature.replace("+", "-").replace("/", "_").rstrip("=")


def _signature(identity: str) -> str | None:
    """The thought signature a call id carries, as Gemini wrote it; ``None`` if none."""
    _, mark, packed = identity.partition(SIGNATURE_MARK)
    if not mark or not packed:
        return None
    signature = packed.replace("-", "+").replace("_", "/")
    return signature + "=" * (-len(signature) % 4)


def call_id(call: JSON, response_id: str, position: int) -> str:
    """The id a function call goes by: its own, or one made from the reply's id and the
    call's position (the same in a whole reply and a stream)."""
    own = call.get("id")
    if isinstance(own, str) and own:
        return own
    stem = response_id or uuid.uuid4().hex
    return f"call_{stem}_{position}"


def stop_of(reply: JSON, candidate: JSON, called: bool) -> Stop | None:
    """Why the reply ended: a function call is ``tool_calls`` (Gemini says ``STOP``)."""
    reason = candidate.get("finishReason")
    if reason is None:
        feedback = reply.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            return "content_filter"
        return None
    if called and reason == "STOP":
        return "tool_calls"
    return FINISH_REASONS.get(str(reason), "end")


def read_usage(metadata: Any) -> Usage | None:
    """``usageMetadata`` as ``Usage`` (thoughts are output); ``None`` without a prompt
    count, or with any number that is not a count (``reported_counts`` refuses and logs
    it)."""
    if not isinstance(metadata, dict):
        return None
    counts = reported_counts(
        {
            "promptTokenCount": metadata.get("promptTokenCount"),
            "candidatesTokenCount": metadata.get("candidatesTokenCount"),
            "thoughtsTokenCount": metadata.get("thoughtsTokenCount"),
            "cachedContentTokenCount": metadata.get("cachedContentTokenCount"),
        },
        source="the Gemini upstream",
        required=("promptTokenCount",),
    )
    if counts is None:
        return None
    prompt, thoughts = counts["promptTokenCount"], counts["thoughtsTokenCount"]
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=counts["candidatesTokenCount"] + thoughts,
        cached_tokens=min(counts["cachedContentTokenCount"], prompt),
        reasoning_tokens=thoughts,
    )


def embed_request(model: str, texts: list[str], dimensions: int | None) -> JSON:
    """A ``batchEmbedContents`` body: one request per text."""
    requests: list[JSON] = []
    for text in texts:
        one: JSON = {"model": f"models/{model}", "content": {"parts": [{"text": text}]}}
        if dimensions is not None:
            one["outputDimensionality"] = dimensions
        requests.append(one)
    return {"requests": requests}


def embed_vectors(reply: Any) -> list[list[float]] | None:
    """The vectors of a ``batchEmbedContents`` reply, in order; ``None`` when malformed."""
    embeddings = reply.get("embeddings") if isinstance(reply, dict) else None
    if not isinstance(embeddings, list):
        return None
    vectors: list[list[float]] = []
    for embedding in embeddings:
        values = embedding.get("values") if isinstance(embedding, dict) else None
        if not isinstance(values, list):
            return None
        vectors.append(values)
    return vectors


def error_envelope(raw: bytes) -> JSON | None:
    """Google's ``{"error": {"code", "message", "status"}}`` as OpenAI's envelope (its
    ``status`` as the ``code``), for the refusal to relay; ``None`` when it is not one."""
    try:
        body = upstream_json.loads(raw)
    except orjson.JSONDecodeError:
        return None
    details = body.get("error") if isinstance(body, dict) else None
    if not isinstance(details, dict):
        return None
    return {"error": {"message": details.get("message"), "code": details.get("status")}}


def key_refused(envelope: JSON | None) -> bool:
    """Whether a 400 is Google's answer to a bad API key (``API_KEY_INVALID``): the
    channel's fault, not the request's."""
    details = envelope.get("error") if envelope else None
    message = details.get("message") if isinstance(details, dict) else None
    return isinstance(message, str) and "API key" in message
