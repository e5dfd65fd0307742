"""A fake Amazon Bedrock runtime (Converse and ConverseStream), over real HTTP, written
from the Bedrock API reference.

    async with FakeBedrock(credentials=KEYS, region="us-east-1") as upstream:
        upstream.endpoint        # "http://127.0.0.1:<port>", a bedrock channel's base_url
        upstream.requests        # every request received (ReceivedRequest), oldest first

``POST /model/{modelId}/converse`` and ``/model/{modelId}/converse-stream`` (and ``/invoke`` for
image models: ``bedrock_images.py``), the model id
percent-encoded in the path. Every request's AWS Signature Version 4 is **verified**:
recomputed with botocore's own signer from the request as received (the headers its
``SignedHeaders`` names, the raw path, the body) and compared; a mismatch is a 403
``InvalidSignatureException``, an unknown access key a 403
``UnrecognizedClientException``, a wrong session token a 403
``UnrecognizedClientException``, a date more than five minutes off a 403. Errors are
Bedrock's: the status, ``x-amzn-ErrorType: <Name>:http://internal.amazon.com/...`` and
``{"message": ...}``. A body that breaks Converse's rules (roles, blocks, a ``toolUse``
without ``toolConfig``, an image format) is a 400 ``ValidationException``.

The reply echoes the last user message's text, word by word (``"echo: ..."``), cut at
``inferenceConfig.maxTokens`` words (``stopReason: max_tokens``). Structured output is
honoured: with ``outputConfig.textFormat`` (``type: json_schema``, the schema a JSON
string under ``structure.jsonSchema.schema``) the text is a JSON instance of the schema,
and a ``toolChoice`` naming a tool makes the reply that tool's call alone, its input an
instance of the tool's ``inputSchema`` (``instance``: strings are the echo, numbers its
word count; an object without properties is ``{"echo": ...}``). Usage counts words:
``inputTokens`` every text word of the system and the messages, ``outputTokens`` the
words produced. Knobs, as ``+``-separated parts of the model id after its first part:

- ``fail-<ExceptionName>``: answer that exception with its status (``EXCEPTIONS``).
- ``exception-after-N``: a stream sends N events, then a ``modelStreamErrorException``
  exception frame; ``throttle-after-N`` a ``throttlingException`` one.
- ``bad-crc``: a stream's second frame has a wrong message checksum.
- ``cut-after-N``: a stream sends N events, then ends its body, without ``messageStop``.
- ``tool``: with ``toolConfig``, and no ``toolResult`` last, the reply calls the first
  tool with ``{"query": <the echo>}`` (``stopReason: tool_use``).
- ``reasoning``: the reply opens with a ``reasoningContent`` block and its signature.
- ``redacted``: then a ``reasoningContent`` block of ``redactedContent`` (``REDACTED``).

Claude's rule for thinking is kept: with ``additionalModelRequestFields.thinking``
enabled, the last assistant message that calls a tool must open with its
``reasoningContent``, and a ``reasoningText`` whose ``signature`` is not the one the fake
wrote (``SIGNATURE``), or a ``redactedContent`` that is not ``REDACTED``, is refused (a
400 ``ValidationException``, as Bedrock answers).
- ``guardrail``: ``stopReason: guardrail_intervened``.
- ``cache-R-W``: usage reports R cache-read and W cache-write input tokens.

A stream is ConverseStream's events in event-stream frames: ``messageStart``, each
block's ``contentBlockStart`` (tool use) / ``contentBlockDelta`` / ``contentBlockStop``,
``messageStop`` with the ``stopReason``, ``metadata`` with ``usage`` and ``metrics``.
Each frame is written in two pieces, cut mid-frame, so a reader must join them.
``Behaviour.usage`` (set on ``upstream.behaviour``) replaces counts of the ``usage`` with
any value: what a broken or hostile upstream may send.
"""

from __future__ import annotations

import itertools
import json
import struct
import zlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from unittest import mock
from urllib.parse import unquote

import orjson
from aiohttp import web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.upstreams import bedrock_images
from tests.upstreams.server import JSON, FakeServer, input_words, last_user_text, received

SIGNATURE = "ErcBCkgIBRABGAIiQGZha2Ugc2lnbmF0dXJl"
REDACTED = "RW5jcnlwdGVkIHRoaW5raW5nLCByZWFkIGJ5IHRoZSBtb2RlbCBhbG9uZS4="
THOUGHT = ("I", " should", " echo.")
EXCEPTIONS = {
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "ResourceNotFoundException": 404,
    "ModelTimeoutException": 408,
    "ModelErrorException": 424,
    "ThrottlingException": 429,
    "ModelNotReadyException": 429,
    "ServiceQuotaExceededException": 400,
    "InternalServerException": 500,
    "ServiceUnavailableException": 503,
}
"""Exception → status, as the Converse reference lists them."""
BLOCKS = frozenset({"text", "image", "toolUse", "toolResult", "reasoningContent", "cachePoint"})
FORMATS = frozenset({"png", "jpeg", "gif", "webp"})


@dataclass(frozen=True)
class AwsKeys:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None


@dataclass(frozen=True, slots=True)
class Behaviour:
    fail: str | None = None
    exception_after: int | None = None
    exception: str = "modelStreamErrorException"
    bad_crc: bool = False
    tool: bool = False
    reasoning: bool = False
    redacted: bool = False
    guardrail: bool = False
    cache_read: int = 0
    cache_write: int = 0
    cut_after: int | None = None
    usage: JSON | None = None

    def with_model(self, model: str) -> Behaviour:
        behaviour = self
        for part in model.split("+")[1:]:
            name, _, arg = part.partition("-")
            if name == "fail":
                behaviour = replace(behaviour, fail=arg)
            elif part.startswith("exception-after-"):
                behaviour = replace(behaviour, exception_after=int(part.rpartition("-")[2]))
            elif part.startswith("throttle-after-"):
                after = int(part.rpartition("-")[2])
                behaviour = replace(
                    behaviour, exception_after=after, exception="throttlingException"
                )
            elif part.startswith("cut-after-"):
                behaviour = replace(behaviour, cut_after=int(part.rpartition("-")[2]))
            elif part == "bad-crc":
                behaviour = replace(behaviour, bad_crc=True)
            elif part in ("tool", "reasoning", "redacted", "guardrail"):
                behaviour = replace(behaviour, **{part: True})
            elif name == "cache":
                read, _, write = arg.partition("-")
                behaviour = replace(behaviour, cache_read=int(read), cache_write=int(write))
        return behaviour


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (lengths and their CRC32), string headers
    (type 7), payload, and the CRC32 of all of it."""
    encoded = b"".join(
        bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value.encode()))
        + value.encode()
        for name, value in headers.items()
    )  # fmt: skip
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return head + struct.pack(">I", zlib.crc32(head))


def event_frame(name: str, payload: JSON) -> bytes:
    headers = {":event-type": name, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, orjson.dumps(payload))


def exception_frame(name: str, message: str) -> bytes:
    headers = {
        ":exception-type": name,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, orjson.dumps({"message": message}))


def error_reply(name: str, message: str, status: int | None = None) -> web.Response:
    return web.Response(
        status=status or EXCEPTIONS.get(name, 400),
        body=orjson.dumps({"message": message}),
        content_type="application/json",
        headers={
            "x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        },
    )


@dataclass
class FakeBedrock(FakeServer):
    credentials: AwsKeys = field(default_factory=lambda: AwsKeys("AKIAFAKE0000", "fake/secret"))
    region: str = "us-east-1"
    behaviour: Behaviour = field(default_factory=Behaviour)
    raw_paths: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(received(request, body))
        self.raw_paths.append(request.raw_path)
        refused = self._check_signature(request, raw)
        if refused is not None:
            return refused
        parts = request.raw_path.split("?", 1)[0].split("/")
        if (
            len(parts) != 4
            or parts[1] != "model"
            or parts[3] not in ("converse", "converse-stream", "invoke")
        ):
            return error_reply("UnknownOperationException", "Unknown operation", 404)
        model = unquote(parts[2])
        if parts[3] == "invoke":
            return bedrock_images.invoke(body, model, _invalid)
        behaviour = self.behaviour.with_model(model)
        if behaviour.fail is not None:
            return error_reply(behaviour.fail, f"Fake failure ({behaviour.fail}).")
        problem = _validate(body)
        if problem is not None:
            return error_reply("ValidationException", problem)
        reply = self._reply(body, behaviour)
        if parts[3] == "converse-stream":
            return await self._stream(request, reply, behaviour)
        return web.Response(body=orjson.dumps(reply), content_type="application/json")

    def _check_signature(self, request: web.Request, raw: bytes) -> web.Response | None:
        authorization = request.headers.get("Authorization", "")
        fields = dict(
            part.strip().split("=", 1) for part in authorization.partition(" ")[2].split(",")
            if "=" in part
        )  # fmt: skip
        credential = fields.get("Credential", "").split("/")
        keys = self.credentials
        if not authorization.startswith("AWS4-HMAC-SHA256 ") or len(credential) != 5:
            return error_reply("IncompleteSignatureException", "Authorization header invalid", 403)
        if credential[0] != keys.access_key_id:
            return error_reply(
                "UnrecognizedClientException", "The security token included is invalid.", 403
            )
        if request.headers.get("X-Amz-Security-Token") != keys.session_token:
            return error_reply(
                "UnrecognizedClientException", "The security token included is invalid.", 403
            )
        if credential[2:] != [self.region, "bedrock", "aws4_request"]:
            return error_reply("InvalidSignatureException", "Credential should be scoped", 403)
        try:
            when = datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
        except (KeyError, ValueError):
            return error_reply("IncompleteSignatureException", "X-Amz-Date missing", 403)
        if abs((datetime.now(UTC).replace(tzinfo=None) - when).total_seconds()) > 300:
            return error_reply("InvalidSignatureException", "Signature expired", 403)
        signed = fields.get("SignedHeaders", "").split(";")
        if "host" not in signed or "x-amz-date" not in signed:
            return error_reply(
                "InvalidSignatureException", "host and x-amz-date must be signed", 403
            )
        headers = {name: request.headers.get(name, "") for name in signed if name != "x-amz-date"}
        url = f"http://{request.host}{request.raw_path}"
        expected = AWSRequest(method=request.method, url=url, data=raw, headers=headers)
        boto = Credentials(keys.access_key_id, keys.secret_access_key, keys.session_token)
        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            SigV4Auth(boto, "bedrock", self.region).add_auth(expected)
        if expected.headers["Authorization"] != authorization:
            return error_reply(
                "InvalidSignatureException",
                "The request signature we calculated does not match the signature you provided.",
                403,
            )
        return None

    def _reply(self, body: JSON, behaviour: Behaviour) -> JSON:
        echo = f"echo: {last_user_text(body, _texts)}"
        text_format = (body.get("outputConfig") or {}).get("textFormat")
        if text_format is not None:
            schema = orjson.loads(text_format["structure"]["jsonSchema"]["schema"])
            echo = json.dumps(instance(schema, echo))
        words = echo.split()
        limit = (body.get("inferenceConfig") or {}).get("maxTokens")
        stop = "guardrail_intervened" if behaviour.guardrail else "end_turn"
        if isinstance(limit, int) and len(words) > limit:
            words, stop = words[:limit], "max_tokens"
        content: list[JSON] = []
        if behaviour.reasoning:
            thought = {"text": "".join(THOUGHT), "signature": SIGNATURE}
            content.append({"reasoningContent": {"reasoningText": thought}})
        if behaviour.redacted:
            content.append({"reasoningContent": {"redactedContent": REDACTED}})
        text = " ".join(words)
        tools = (body.get("toolConfig") or {}).get("tools") or []
        specs = [tool["toolSpec"] for tool in tools if "toolSpec" in tool]
        forced = ((body.get("toolConfig") or {}).get("toolChoice") or {}).get("tool")
        if forced is not None:  # a forced tool's call is the whole reply, without text
            spec = next(spec for spec in specs if spec["name"] == forced["name"])
            arguments = instance(spec["inputSchema"]["json"], echo)
            use = {"toolUseId": f"tooluse_{next(self._ids)}", "name": spec["name"],
                   "input": arguments}  # fmt: skip
            content.append({"toolUse": use})
            words, stop = json.dumps(arguments).split(), "tool_use"
        else:
            content.append({"text": text})
        if behaviour.tool and specs and not forced and not _tool_result_last(body):
            use = {"toolUseId": f"tooluse_{next(self._ids)}", "name": specs[0]["name"],
                   "input": {"query": text}}  # fmt: skip
            content.append({"toolUse": use})
            stop = "tool_use"
        output = len(words) + (len(THOUGHT) if behaviour.reasoning else 0)
        usage = {
            "inputTokens": input_words(body, _texts),
            "outputTokens": output,
            "totalTokens": input_words(body, _texts) + output + behaviour.cache_read
            + behaviour.cache_write,
        }  # fmt: skip
        if behaviour.cache_read or behaviour.cache_write:
            usage["cacheReadInputTokens"] = behaviour.cache_read
            usage["cacheWriteInputTokens"] = behaviour.cache_write
        usage.update(behaviour.usage or {})
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": stop,
            "usage": usage,
            "metrics": {"latencyMs": 12},
        }

    async def _stream(
        self, request: web.Request, reply: JSON, behaviour: Behaviour
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "application/vnd.amazon.eventstream"}
        )
        await response.prepare(request)
        for index, sent in enumerate(_events(reply)):
            if index == behaviour.cut_after:
                break  # the body ends without ``messageStop``
            if index == behaviour.exception_after:
                await response.write(exception_frame(behaviour.exception, "Fake stream failure."))
                break
            data = (
                sent[:-1] + bytes([sent[-1] ^ 0xFF]) if behaviour.bad_crc and index == 1 else sent
            )
            middle = len(data) // 2
            await response.write(data[:middle])
            await response.write(data[middle:])
        await response.write_eof()
        return response


def _invalid(message: str) -> web.Response:
    return error_reply("ValidationException", message)


def _events(reply: JSON) -> list[bytes]:
    out = [event_frame("messageStart", {"role": "assistant"})]
    for index, block in enumerate(reply["output"]["message"]["content"]):
        if "toolUse" in block:
            use = block["toolUse"]
            start = {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}
            out.append(event_frame("contentBlockStart",
                                   {"contentBlockIndex": index, "start": start}))  # fmt: skip
            arguments = orjson.dumps(use["input"]).decode()
            middle = len(arguments) // 2
            deltas: list[JSON] = [{"toolUse": {"input": part}}
                                  for part in (arguments[:middle], arguments[middle:])]  # fmt: skip
        elif "redactedContent" in block.get("reasoningContent", {}):
            deltas = [{"reasoningContent": {"redactedContent": REDACTED}}]
        elif "reasoningContent" in block:
            deltas = [{"reasoningContent": {"text": piece}} for piece in THOUGHT]
            signature = block["reasoningContent"]["reasoningText"]["signature"]
            deltas.append({"reasoningContent": {"signature": signature}})
        else:
            words = block["text"].split(" ")
            deltas = [{"text": w if i == 0 else f" {w}"} for i, w in enumerate(words)]
        out.extend(
            event_frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})
            for delta in deltas
        )
        out.append(event_frame("contentBlockStop", {"contentBlockIndex": index}))
    out.append(event_frame("messageStop", {"stopReason": reply["stopReason"]}))
    out.append(event_frame("metadata", {"usage": reply["usage"], "metrics": reply["metrics"]}))
    return out


def _validate(body: Any) -> str | None:
    """Converse's rules the fake enforces, as a ValidationException's message."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return "Malformed input request: messages is required"
    if not body["messages"] or body["messages"][0].get("role") != "user":
        return "A conversation must start with a user message."
    tools_declared = bool((body.get("toolConfig") or {}).get("tools"))
    previous = None
    for n, message in enumerate(body["messages"]):
        role = message.get("role")
        if role not in ("user", "assistant") or role == previous:
            return f"messages.{n}.role: roles must alternate between user and assistant"
        previous = role
        for block in message.get("content") or ():
            if len(block) != 1 or next(iter(block)) not in BLOCKS:
                return f"messages.{n}.content: unknown content block {sorted(block)}"
            if "image" in block and block["image"].get("format") not in FORMATS:
                return f"messages.{n}.content: image format must be png, jpeg, gif or webp"
            if "image" in block and not isinstance(block["image"]["source"].get("bytes"), str):
                return f"messages.{n}.content: image source bytes required"
            if ("toolUse" in block or "toolResult" in block) and not tools_declared:
                return (
                    "toolConfig field must be defined when using toolUse and toolResult "
                    "content blocks."
                )
    config = body.get("inferenceConfig") or {}
    thought = _validate_thinking(body)
    if thought is not None:
        return thought
    unknown = set(config) - {"maxTokens", "temperature", "topP", "stopSequences"}
    if unknown:
        return f"inferenceConfig: unknown fields {sorted(unknown)}"
    unknown = set(body) - {"messages", "system", "inferenceConfig", "toolConfig",
                           "additionalModelRequestFields", "guardrailConfig",
                           "outputConfig"}  # fmt: skip
    if unknown:
        return f"Malformed input request: unknown fields {sorted(unknown)}"
    return _validate_output(body) or _validate_tool_choice(body)


def _validate_thinking(body: JSON) -> str | None:
    """Claude's rules for thinking in history: signatures the model wrote, and, with
    thinking on, the last assistant turn that calls a tool opening with its thinking."""
    for n, message in enumerate(body["messages"]):
        for block in message.get("content") or ():
            reasoning = block.get("reasoningContent")
            if reasoning is None:
                continue
            text = reasoning.get("reasoningText")
            if text is not None and text.get("signature") != SIGNATURE:
                return f"messages.{n}.content: Invalid `signature` in `thinking` block"
            if text is None and reasoning.get("redactedContent") != REDACTED:
                return f"messages.{n}.content: Invalid `data` in `redacted_thinking` block"
    thinking = (body.get("additionalModelRequestFields") or {}).get("thinking") or {}
    if thinking.get("type") != "enabled":
        return None
    calls = [
        message for message in body["messages"]
        if message["role"] == "assistant"
        and any("toolUse" in block for block in message.get("content") or ())
    ]  # fmt: skip
    if calls and "reasoningContent" not in (calls[-1].get("content") or [{}])[0]:
        return (
            "Expected `thinking` or `redacted_thinking`, but found `tool_use`. When "
            "`thinking` is enabled, a final `assistant` message must start with a thinking "
            "block."
        )
    return None


def _validate_output(body: JSON) -> str | None:
    """``outputConfig.textFormat``: ``type: json_schema`` and a ``structure`` whose one
    member, ``jsonSchema``, holds the schema as a JSON string (an object schema)."""
    if "outputConfig" not in body:
        return None
    text_format = body["outputConfig"].get("textFormat")
    if not isinstance(text_format, dict) or text_format.get("type") != "json_schema":
        return "outputConfig.textFormat.type: must be json_schema"
    structure = text_format.get("structure")
    if not isinstance(structure, dict) or set(structure) != {"jsonSchema"}:
        return "outputConfig.textFormat.structure: exactly one member, jsonSchema"
    schema = structure["jsonSchema"].get("schema")
    if not isinstance(schema, str):
        return "outputConfig.textFormat.structure.jsonSchema.schema: must be a string"
    try:
        parsed = orjson.loads(schema)
    except orjson.JSONDecodeError:
        return "outputConfig.textFormat.structure.jsonSchema.schema: not valid JSON"
    return None if isinstance(parsed, dict) else "The JSON schema must be an object"


def _validate_tool_choice(body: JSON) -> str | None:
    config = body.get("toolConfig") or {}
    choice = (config.get("toolChoice") or {}).get("tool")
    names = [tool["toolSpec"]["name"] for tool in config.get("tools") or () if "toolSpec" in tool]
    if choice is not None and choice.get("name") not in names:
        return "toolConfig.toolChoice.tool.name: must name one of the tools"
    return None


def instance(schema: Any, echo: str) -> Any:
    """A value the schema accepts, made of the echo: strings are it, numbers its word
    count, an object without properties ``{"echo": <it>}``."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "object":
        properties = schema.get("properties")
        if not properties:
            return {"echo": echo}
        return {name: instance(inner, echo) for name, inner in properties.items()}
    if kind == "array":
        return [instance(schema.get("items") or {"type": "string"}, echo)]
    if kind in ("integer", "number"):
        return len(echo.split())
    if kind == "boolean":
        return True
    return echo


def _texts(content: Any) -> list[str]:
    found: list[str] = []
    for block in content or ():
        if isinstance(block.get("text"), str):
            found.append(block["text"])
        elif "toolResult" in block:
            found.extend(_texts(block["toolResult"].get("content")))
    return found


def _tool_result_last(body: JSON) -> bool:
    content = (body.get("messages") or [{}])[-1].get("content") or ()
    return any("toolResult" in block for block in content)
