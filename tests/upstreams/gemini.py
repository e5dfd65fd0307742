"""A fake Gemini API (Google AI Studio), over real HTTP, written from Google's API reference
(``models.generateContent``, ``models.streamGenerateContent``, ``models.batchEmbedContents``).

    async with FakeGemini(api_key="k") as upstream:
        upstream.base_url        # "http://127.0.0.1:<port>/v1beta", a channel's base_url
        upstream.requests        # every request received (ReceivedRequest), oldest first

``POST /v1beta/models/{model}:generateContent``, ``:streamGenerateContent?alt=sse`` (each
SSE event a whole ``GenerateContentResponse``) and ``:batchEmbedContents``. A request
without ``x-goog-api-key: <key>`` gets Google's 400 ``API key not valid``. Errors are
Google's: ``{"error": {"code", "message", "status"}}``. A body is checked as the API
does: unknown fields, roles other than ``user``/``model``, a part that is not exactly one
of ``text``, ``inlineData``, ``fileData``, ``functionCall``, ``functionResponse``,
undecodable ``inlineData``, and a ``functionResponse`` that answers no call are 400s.

The reply echoes the last user turn's text, word by word (``"echo: ..."``; images are
told as ``[image/png]``), cut at ``maxOutputTokens`` words (``MAX_TOKENS``); a last turn
of ``functionResponse`` parts is answered ``"result: <its output>"``. Usage counts
words: ``promptTokenCount`` every text word of the instructions and the contents (plus
the cached tokens), ``candidatesTokenCount`` the words produced. Knobs, as
``+``-separated parts of the model name (or ``upstream.behaviour``):

- ``fail-N``: answer status N with Google's status name for it (``STATUSES``).
- ``retry-D``: a failure's ``details`` say when to come back, as Google's 429
  ``RESOURCE_EXHAUSTED`` does: a ``QuotaFailure`` and a ``RetryInfo`` whose
  ``retryDelay`` is D (``30s``), and no ``retry-after`` header.
- ``error-after-N``: a stream sends N events, then an ``error`` event (``INTERNAL``).
- ``cut-after-N``: a stream sends N events, then ends its body, no ``finishReason`` sent.
- ``tool``: with ``tools`` and no ``functionResponse`` last, the reply calls the first
  function with ``{"query": <the echo>}`` (``finishReason: STOP``, as Gemini says).
- ``thoughts-N``: ``thoughtsTokenCount`` N, and a thought part when ``includeThoughts``.
- ``cached-N``: ``cachedContentTokenCount`` N.
- ``safety``: the candidate ends with ``SAFETY`` and no text.
- ``call-id``: function calls carry Gemini's optional ``id``.
- ``signed``: function call parts carry a ``thoughtSignature`` (``SIGNATURE``), and, as
  thinking models do, a request whose model turn holds a call without it is a 400.

With ``responseMimeType: application/json`` the text is ``{"echo": "<the echo>"}``.
``Behaviour.usage`` (set on ``upstream.behaviour``) replaces counts of ``usageMetadata``
with any value: what a broken or hostile upstream may send.
"""

from __future__ import annotations

import base64
import binascii
import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web

from tests.upstreams import google_images
from tests.upstreams.server import JSON, FakeServer, json_reply, received

STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
THOUGHT = "Let me echo."
SIGNATURE = base64.b64encode(b"\xfb\xef\xff signed thought \xfe\xff").decode()
"""A thought signature with ``+``, ``/`` and ``=`` in it, as real ones have."""
REQUEST_FIELDS = frozenset(
    {
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "generationConfig",
        "safetySettings",
        "cachedContent",
        "labels",
    }
)
GENERATION_FIELDS = frozenset(
    {
        "temperature",
        "topP",
        "topK",
        "maxOutputTokens",
        "stopSequences",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "thinkingConfig",
        "candidateCount",
        "seed",
    }
)
PART_KINDS = frozenset({"text", "inlineData", "fileData", "functionCall", "functionResponse"})


@dataclass(frozen=True, slots=True)
class Behaviour:
    fail: int | None = None
    retry_delay: str | None = None
    error_after: int | None = None
    tool: bool = False
    thoughts: int = 0
    cached: int = 0
    safety: bool = False
    call_id: bool = False
    signed: bool = False
    cut_after: int | None = None
    usage: JSON | None = None

    def with_model(self, model: str) -> Behaviour:
        behaviour = self
        for part in model.split("+"):
            name, _, arg = part.rpartition("-")
            if part in ("tool", "safety", "signed"):
                behaviour = replace(behaviour, **{part: True})
            elif part == "call-id":
                behaviour = replace(behaviour, call_id=True)
            elif name == "fail":
                behaviour = replace(behaviour, fail=int(arg))
            elif name == "retry":
                behaviour = replace(behaviour, retry_delay=arg)
            elif name == "cut-after":
                behaviour = replace(behaviour, cut_after=int(arg))
            elif name == "error-after":
                behaviour = replace(behaviour, error_after=int(arg))
            elif name == "thoughts":
                behaviour = replace(behaviour, thoughts=int(arg))
            elif name == "cached":
                behaviour = replace(behaviour, cached=int(arg))
        return behaviour


def google_error(code: int, message: str) -> JSON:
    return {"error": {"code": code, "message": message, "status": STATUSES.get(code, "UNKNOWN")}}


def retry_details(delay: str) -> list[JSON]:
    """A quota error's ``details``, as the Gemini API writes them."""
    return [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel",
                }
            ],
        },
        {"@type": "type.googleapis.com/google.rpc.Help", "links": []},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
    ]


class Invalid(Exception):
    """A request the API refuses with 400 ``INVALID_ARGUMENT``."""


@dataclass
class GoogleContent:
    """The ``generateContent`` model both fakes share: checks a body, writes a reply."""

    behaviour: Behaviour = field(default_factory=Behaviour)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def generate(self, body: Any, model: str) -> tuple[int, JSON, Behaviour]:
        """The status, reply (or error) and behaviour for ``body`` sent to ``model``."""
        behaviour = self.behaviour.with_model(model)
        if behaviour.fail is not None:
            error = google_error(behaviour.fail, "Fake failure.")
            if behaviour.retry_delay is not None:
                error["error"]["details"] = retry_details(behaviour.retry_delay)
            return behaviour.fail, error, behaviour
        try:
            check(body)
        except Invalid as error:
            return 400, google_error(400, str(error)), behaviour
        if behaviour.signed and _unsigned_call(body):
            message = "Function call is missing a thought_signature in functionCall parts."
            return 400, google_error(400, message), behaviour
        return 200, self._reply(body, model, behaviour), behaviour

    def _reply(self, body: JSON, model: str, behaviour: Behaviour) -> JSON:
        config = body.get("generationConfig") or {}
        last = body["contents"][-1]
        results = [p["functionResponse"] for p in last["parts"] if "functionResponse" in p]
        if results:
            output = results[0]["response"].get("output", results[0]["response"])
            text = f"result: {output if isinstance(output, str) else orjson.dumps(output).decode()}"
        else:
            text = f"echo: {_turn_text(last)}"
        words = text.split()
        limit = config.get("maxOutputTokens")
        finish = "STOP"
        if isinstance(limit, int) and len(words) > limit:
            words, finish = words[:limit], "MAX_TOKENS"
        said = " ".join(words)
        if config.get("responseMimeType") == "application/json":
            said = orjson.dumps({"echo": said}).decode()
        parts: list[JSON] = []
        thinking = config.get("thinkingConfig") or {}
        if behaviour.thoughts and thinking.get("includeThoughts"):
            parts.append({"text": THOUGHT, "thought": True})
        if behaviour.safety:
            finish, words = "SAFETY", []
        else:
            parts.append({"text": said})
        tools = body.get("tools")
        if behaviour.tool and tools and not results:
            call: JSON = {
                "name": tools[0]["functionDeclarations"][0]["name"],
                "args": {"query": said},
            }
            if behaviour.call_id:
                call["id"] = f"fc-{next(self._ids)}"
            part: JSON = {"functionCall": call}
            if behaviour.signed:
                part["thoughtSignature"] = SIGNATURE
            parts.append(part)
        prompt = _input_words(body) + behaviour.cached
        usage: JSON = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": len(words),
            "totalTokenCount": prompt + len(words) + behaviour.thoughts,
        }
        if behaviour.cached:
            usage["cachedContentTokenCount"] = behaviour.cached
        if behaviour.thoughts:
            usage["thoughtsTokenCount"] = behaviour.thoughts
        usage.update(behaviour.usage or {})
        candidate = {
            "content": {"role": "model", "parts": parts},
            "finishReason": finish,
            "index": 0,
        }
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": f"resp-{next(self._ids)}",
        }

    async def answer(
        self, request: web.Request, body: Any, model: str, method: str
    ) -> web.StreamResponse:
        """The reply to ``method`` (``generateContent``, or ``streamGenerateContent`` with
        ``alt=sse``) of ``model``; any other method is a 404."""
        if method not in ("generateContent", "streamGenerateContent"):
            return json_reply(404, google_error(404, f"Method {method} not found."))
        status, reply, behaviour = self.generate(body, model)
        if status != 200 or method == "generateContent":
            return json_reply(status, reply)
        if request.query.get("alt") != "sse":
            return json_reply(400, google_error(400, "This fake streams with alt=sse only."))
        return await stream(request, self.events(reply, behaviour))

    def events(self, reply: JSON, behaviour: Behaviour) -> list[bytes]:
        """The reply as Gemini streams it: text a word an event, every other part in one,
        ``finishReason`` and the final ``usageMetadata`` on the last event."""
        candidate = reply["candidates"][0]
        pieces: list[JSON] = []
        for part in candidate["content"]["parts"]:
            if "text" in part and not part.get("thought"):
                words = part["text"].split(" ")
                pieces.extend({"text": w if i == 0 else f" {w}"} for i, w in enumerate(words))
            else:
                pieces.append(part)
        out: list[bytes] = []
        base = {"modelVersion": reply["modelVersion"], "responseId": reply["responseId"]}
        usage = reply["usageMetadata"]
        for index, part in enumerate(pieces):
            running = {"promptTokenCount": usage["promptTokenCount"], "totalTokenCount": index}
            event = {
                **base,
                "candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}],
                "usageMetadata": running,
            }
            if index == len(pieces) - 1:
                event["candidates"][0]["finishReason"] = candidate["finishReason"]
                event["usageMetadata"] = usage
            out.append(sse(event))
        if not pieces:
            out.append(sse({**base, "candidates": [{**candidate}], "usageMetadata": usage}))
        if behaviour.cut_after is not None:
            out = out[: behaviour.cut_after]  # the body ends, no ``finishReason`` sent
        if behaviour.error_after is not None:
            out = out[: behaviour.error_after]
            out.append(sse(google_error(500, "Internal error encountered.")))
        return out


def sse(payload: JSON) -> bytes:
    """One event as the API writes it (``data:`` and a blank line, CRLF)."""
    return b"data: " + orjson.dumps(payload) + b"\r\n\r\n"


def check(body: Any) -> None:
    """Raise ``Invalid`` for what the API refuses."""
    if not isinstance(body, dict):
        raise Invalid("Invalid JSON payload received.")
    for name in body:
        if name not in REQUEST_FIELDS:
            raise Invalid(
                f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.'
            )
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise Invalid("* GenerateContentRequest.contents: contents is not specified")
    calls: list[str] = []
    for n, content in enumerate(contents):
        if content.get("role") not in ("user", "model"):
            raise Invalid(f"Please use a valid role: user, model. (contents[{n}])")
        parts = content.get("parts")
        if not isinstance(parts, list) or not parts:
            raise Invalid(
                f"* GenerateContentRequest.contents[{n}].parts: contents.parts must not be empty."
            )
        for part in parts:
            _check_part(part, content["role"], calls)
    _check_tools_and_config(body)


def _check_tools_and_config(body: JSON) -> None:
    system = body.get("systemInstruction")
    if system is not None:
        for part in system.get("parts") or ():
            if set(part) != {"text"}:
                raise Invalid("systemInstruction takes text parts.")
    for tool in body.get("tools") or ():
        for declaration in tool.get("functionDeclarations") or ():
            if not isinstance(declaration.get("name"), str):
                raise Invalid(
                    "* GenerateContentRequest.tools[0].function_declarations[0].name: "
                    "Name is required"
                )
            if "parameters" in declaration and "parametersJsonSchema" in declaration:
                raise Invalid("parameters and parametersJsonSchema are mutually exclusive.")
    for name in body.get("generationConfig") or {}:
        if name not in GENERATION_FIELDS:
            raise Invalid(
                f"Invalid JSON payload received. Unknown name \"{name}\" at 'generation_config'."
            )


def _check_part(part: Any, role: str, calls: list[str]) -> None:
    kinds = set(part) & PART_KINDS if isinstance(part, dict) else set()
    if len(kinds) != 1 or not set(part) <= PART_KINDS | {"thought", "thoughtSignature"}:
        raise Invalid(
            "A part must hold exactly one of text, inlineData, fileData, functionCall, "
            "functionResponse."
        )
    if "inlineData" in part:
        data = part["inlineData"]
        try:
            base64.b64decode(data["data"], validate=True)
        except (KeyError, binascii.Error):
            raise Invalid("Unable to process input image: inlineData.data is not base64.") from None
        if not str(data.get("mimeType", "")).startswith("image/"):
            raise Invalid("Unsupported MIME type.")
    elif "functionCall" in part:
        if role != "model":
            raise Invalid("A functionCall part belongs to a model turn.")
        calls.append(part["functionCall"]["name"])
    elif "functionResponse" in part:
        response = part["functionResponse"]
        if response.get("name") not in calls or not isinstance(response.get("response"), dict):
            raise Invalid(
                "A functionResponse must name an earlier functionCall and hold a response object."
            )


def _unsigned_call(body: JSON) -> bool:
    return any(
        "functionCall" in part and part.get("thoughtSignature") != SIGNATURE
        for content in body["contents"]
        if content["role"] == "model"
        for part in content["parts"]
    )


def _turn_text(content: JSON) -> str:
    said: list[str] = []
    for part in content["parts"]:
        if "text" in part:
            said.append(part["text"])
        elif "inlineData" in part:
            said.append(f"[{part['inlineData']['mimeType']}]")
        elif "fileData" in part:
            said.append(f"[{part['fileData']['mimeType']}]")
    return " ".join(said)


def _input_words(body: JSON) -> int:
    texts = [
        part.get("text", "") for part in (body.get("systemInstruction") or {}).get("parts") or ()
    ]
    for content in body["contents"]:
        texts.extend(part["text"] for part in content["parts"] if "text" in part)
    return sum(len(text.split()) for text in texts)


@dataclass
class FakeGemini(FakeServer):
    api_key: str | None = None
    content: GoogleContent = field(default_factory=GoogleContent)

    @property
    def behaviour(self) -> Behaviour:
        return self.content.behaviour

    @behaviour.setter
    def behaviour(self, value: Behaviour) -> None:
        self.content.behaviour = value

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1beta/models/{call}", self._call)
        return app

    async def start(self) -> None:
        await super().start()
        self.base_url = self.base_url.removesuffix("/v1") + "/v1beta"

    async def _call(self, request: web.Request) -> web.StreamResponse:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(received(request, body))
        if self.api_key is not None and request.headers.get("x-goog-api-key") != self.api_key:
            return json_reply(
                400, google_error(400, "API key not valid. Please pass a valid API key.")
            )
        model, _, method = request.match_info["call"].partition(":")
        if google_images.answers(model):
            return google_images.answer(body, model, method)
        if method == "batchEmbedContents":
            return embed(body, model)
        return await self.content.answer(request, body, model, method)


async def stream(request: web.Request, events: list[bytes]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for data in events:
        await response.write(data)
    await response.write_eof()
    return response


def embed(body: Any, model: str) -> web.Response:
    """``batchEmbedContents``: each vector is ``[characters, words, 0.5, ...]`` padded to
    ``outputDimensionality`` (3 by default)."""
    requests = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(requests, list) or not requests:
        return json_reply(
            400,
            google_error(400, "* BatchEmbedContentsRequest.requests: requests is not specified"),
        )
    embeddings = []
    for one in requests:
        if one.get("model") != f"models/{model}":
            return json_reply(400, google_error(400, "Each request's model must be the batch's."))
        text = " ".join(part["text"] for part in one["content"]["parts"])
        size = one.get("outputDimensionality") or 3
        values = [float(len(text)), float(len(text.split()))] + [0.5] * (size - 2)
        embeddings.append({"values": values[:size]})
    return json_reply(200, {"embeddings": embeddings})
