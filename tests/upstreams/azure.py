"""A fake Azure OpenAI resource, over real HTTP, written from Azure OpenAI's REST
reference.

    async with FakeAzure(api_key="k", token="t", deployments={"gpt4o": "gpt-4o"}) as az:
        az.endpoint              # "http://127.0.0.1:<port>", a channel's base_url
        az.requests              # every request received (ReceivedRequest), oldest first

Deployments: ``POST /openai/deployments/{deployment}/chat/completions``,
``.../completions`` and ``.../embeddings``, each needing ``?api-version=`` one of
``API_VERSIONS`` (else a 404 ``Resource not found``, as Azure answers). The v1 endpoint:
``POST /openai/v1/chat/completions`` and ``/openai/v1/embeddings``, the body's ``model``
naming the deployment. Authentication: ``api-key: <key>`` or ``Authorization: Bearer
<token>`` (an Entra token), else a 401; an unknown deployment is a 404
``DeploymentNotFound``. Errors are Azure's ``{"error": {"code", "message", ...}}``.

Replies echo the last user message word by word (``"echo: ..."``), cut at
``max_tokens``, usage counted in words, with Azure's content-filter annotations:
``prompt_filter_results`` (in a stream, a first chunk with ``"choices": []``) and each
choice's ``content_filter_results``. Knobs, as ``+``-separated parts of the deployment
name after its first part:

- ``filter-prompt``: a 400 whose ``code`` is ``content_filter``, ``param`` ``prompt``,
  with an ``innererror`` (``ResponsibleAIPolicyViolation``) and its filter results.
- ``filter-output``: the completion stops after its first word with
  ``finish_reason: content_filter``, its ``content_filter_results`` flagged.
- ``fail-N``: answer status N.
- ``cached-N``: usage reports N prompt tokens as cached.
- ``tools``: a request offering tools, without a tool message last, gets a call of the
  first tool with ``{"query": <the echo>}``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from aiohttp import web

from tests.upstreams.server import JSON, FakeServer, json_reply, last_user_text, received, sse_data

API_VERSIONS = frozenset({"2024-10-21", "2025-04-01-preview"})
SAFE = {name: {"filtered": False, "severity": "safe"}
        for name in ("hate", "self_harm", "sexual", "violence")}  # fmt: skip
FLAGGED = {**SAFE, "violence": {"filtered": True, "severity": "high"}}
PROMPT_FILTERED = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content "
    "management policy. Please modify your prompt and retry."
)


@dataclass(frozen=True, slots=True)
class Behaviour:
    filter_prompt: bool = False
    filter_output: bool = False
    fail: int | None = None
    cached: int = 0
    tools: bool = False

    def with_deployment(self, name: str) -> Behaviour:
        behaviour = self
        for part in name.split("+")[1:]:
            kind, _, arg = part.partition("-")
            if part == "filter-prompt":
                behaviour = replace(behaviour, filter_prompt=True)
            elif part == "filter-output":
                behaviour = replace(behaviour, filter_output=True)
            elif part == "tools":
                behaviour = replace(behaviour, tools=True)
            elif kind == "fail":
                behaviour = replace(behaviour, fail=int(arg))
            elif kind == "cached":
                behaviour = replace(behaviour, cached=int(arg))
        return behaviour


def azure_error(http_status: int, code: str, message: str, **extra: Any) -> web.Response:
    return json_reply(http_status, {"error": {"code": code, "message": message, **extra}})


@dataclass
class FakeAzure(FakeServer):
    api_key: str | None = None
    token: str | None = None
    deployments: dict[str, str] = field(default_factory=dict)
    """Deployment name → the model it runs."""
    behaviour: Behaviour = field(default_factory=Behaviour)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/openai/deployments/{deployment}/{operation:.+}", self._deployment)
        app.router.add_post("/openai/v1/{operation:.+}", self._v1)
        return app

    async def _deployment(self, request: web.Request) -> web.StreamResponse:
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        if request.query.get("api-version") not in API_VERSIONS:
            return azure_error(404, "404", "Resource not found")
        return await self._serve(request, request.match_info["deployment"], body)

    async def _v1(self, request: web.Request) -> web.StreamResponse:
        body, refused = await self._read(request)
        if refused is not None:
            return refused
        return await self._serve(request, str(body.get("model", "")), body)

    async def _read(self, request: web.Request) -> tuple[JSON, web.Response | None]:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        self.requests.append(received(request, body))
        by_key = self.api_key is not None and request.headers.get("api-key") == self.api_key
        by_token = self.token is not None and (
            request.headers.get("Authorization") == f"Bearer {self.token}"
        )
        if not (by_key or by_token):
            return {}, azure_error(
                401, "401", "Access denied due to invalid subscription key or wrong API endpoint."
            )
        if not isinstance(body, dict):
            return {}, azure_error(400, "BadRequest", "The request body is not valid JSON.")
        return body, None

    async def _serve(self, request: web.Request, deployment: str, body: JSON) -> web.StreamResponse:
        model = self.deployments.get(deployment.split("+", maxsplit=1)[0])
        if model is None:
            return azure_error(
                404, "DeploymentNotFound",
                "The API deployment for this resource does not exist.",
            )  # fmt: skip
        behaviour = self.behaviour.with_deployment(deployment)
        if behaviour.fail is not None:
            return azure_error(behaviour.fail, str(behaviour.fail), "Fake Azure failure.")
        operation = request.match_info["operation"]
        if operation == "embeddings":
            return json_reply(200, _embeddings(body, model))
        if behaviour.filter_prompt:
            return azure_error(
                400, "content_filter", PROMPT_FILTERED, param="prompt", type=None, status=400,
                innererror={"code": "ResponsibleAIPolicyViolation",
                            "content_filter_result": FLAGGED},
            )  # fmt: skip
        if operation == "completions":
            return json_reply(200, self._completion(body, model))
        if operation != "chat/completions":
            return azure_error(404, "404", "Resource not found")
        reply = self._chat(body, model, behaviour)
        if body.get("stream"):
            return await self._stream(request, reply, body)
        return json_reply(200, reply)

    def _chat(self, body: JSON, model: str, behaviour: Behaviour) -> JSON:
        words = f"echo: {last_user_text(body, _texts)}".split()
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "stop"
        if isinstance(limit, int) and len(words) > limit:
            words, finish = words[:limit], "length"
        filters = SAFE
        if behaviour.filter_output:
            words, finish, filters = words[:1], "content_filter", FLAGGED
        message: JSON = {"role": "assistant", "content": " ".join(words)}
        tools = body.get("tools")
        last = (body.get("messages") or [{}])[-1]
        if behaviour.tools and tools and last.get("role") != "tool":
            call = {"id": f"call_{next(self._ids)}", "type": "function", "function": {
                "name": tools[0]["function"]["name"],
                "arguments": orjson.dumps({"query": message["content"]}).decode()}}  # fmt: skip
            message["tool_calls"] = [call]
            finish = "tool_calls"
        prompt = _input_words(body)
        usage: JSON = {
            "prompt_tokens": prompt + behaviour.cached,
            "completion_tokens": len(words),
            "total_tokens": prompt + behaviour.cached + len(words),
        }
        if behaviour.cached:
            usage["prompt_tokens_details"] = {"cached_tokens": behaviour.cached}
        return {
            "id": f"chatcmpl-az{next(self._ids)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": model,
            "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": SAFE}],
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None, "content_filter_results": filters}],
            "usage": usage,
        }  # fmt: skip

    def _completion(self, body: JSON, model: str) -> JSON:
        words = f"echo: {body.get('prompt', '')}".split()
        return {
            "id": f"cmpl-az{next(self._ids)}",
            "object": "text_completion",
            "created": 1_700_000_000,
            "model": model,
            "choices": [{"text": " ".join(words), "index": 0, "finish_reason": "stop",
                         "logprobs": None, "content_filter_results": SAFE}],
            "usage": {"prompt_tokens": len(str(body.get("prompt", "")).split()),
                      "completion_tokens": len(words),
                      "total_tokens": len(words) + len(str(body.get("prompt", "")).split())},
        }  # fmt: skip

    async def _stream(self, request: web.Request, reply: JSON, body: JSON) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        head = {"id": reply["id"], "object": "chat.completion.chunk",
                "created": reply["created"], "model": reply["model"]}  # fmt: skip
        await response.write(sse_data({
            "choices": [], "created": 0, "id": "", "model": "", "object": "",
            "prompt_filter_results": reply["prompt_filter_results"]}))  # fmt: skip
        choice = reply["choices"][0]
        message = choice["message"]
        await response.write(sse_data({**head, "choices": [{
            "index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None,
            "content_filter_results": {}}]}))  # fmt: skip
        for index, word in enumerate(message["content"].split(" ")):
            piece = word if index == 0 else f" {word}"
            await response.write(sse_data({**head, "choices": [{
                "index": 0, "delta": {"content": piece}, "finish_reason": None,
                "content_filter_results": SAFE}]}))  # fmt: skip
        for position, call in enumerate(message.get("tool_calls") or ()):
            await response.write(sse_data({**head, "choices": [{
                "index": 0, "delta": {"tool_calls": [{**call, "index": position}]},
                "finish_reason": None}]}))  # fmt: skip
        await response.write(sse_data({**head, "choices": [{
            "index": 0, "delta": {}, "finish_reason": choice["finish_reason"],
            "content_filter_results": choice["content_filter_results"]}]}))  # fmt: skip
        if (body.get("stream_options") or {}).get("include_usage"):
            await response.write(sse_data({**head, "choices": [], "usage": reply["usage"]}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _embeddings(body: JSON, model: str) -> JSON:
    inputs = body.get("input")
    texts = [inputs] if isinstance(inputs, str) else list(inputs or ())
    data = [{"object": "embedding", "index": n,
             "embedding": [float(len(str(text))), float(n), 0.5]}
            for n, text in enumerate(texts)]  # fmt: skip
    tokens = sum(len(str(text).split()) for text in texts)
    return {"object": "list", "data": data, "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}  # fmt: skip


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [part.get("text", "") for part in content or () if part.get("type") == "text"]


def _input_words(body: JSON) -> int:
    return sum(
        len(text.split())
        for message in body.get("messages") or ()
        for text in _texts(message.get("content"))
    )
