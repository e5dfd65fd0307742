"""Rerank on Amazon Bedrock (``type: bedrock``): Cohere's rerank models through
InvokeModel, ``POST {base_url}/model/{model id}/invoke``, signed as every Bedrock call
(``BedrockAdapter``'s signer).

The body is Cohere's as Bedrock takes it: ``{query, documents, top_n?, api_version: 2}``
(``api_version`` is required there); the answer is Cohere's ``{id, results: [{index,
relevance_score}]}``. Bedrock bills rerank per query (a query over up to 100 documents,
Cohere's search unit) and states no count in the reply, so the call is metered on
Parley's. Errors map by Bedrock's exception names (``refusal.py``). Bedrock's other
rerank API (``bedrock-agent-runtime``'s ``Rerank``, Amazon's own model) is not served.
"""

from __future__ import annotations

from typing import Any

from parley import upstream_json
from parley.providers.base import (
    ReplyBounds,
    RerankReply,
    RerankRequest,
    Target,
    upstream_errors,
)
from parley.providers.bedrock.adapter import BedrockAdapter, secret
from parley.providers.bedrock.refusal import refusal
from parley.providers.rankings import ranking

API_VERSION = 2


class BedrockRerank:
    """``Rerank`` over Bedrock's InvokeModel, sending through ``adapter`` (its signer)."""

    __slots__ = ("_adapter", "_bounds")

    def __init__(self, adapter: BedrockAdapter, bounds: ReplyBounds | None = None) -> None:
        self._adapter = adapter
        self._bounds = bounds or ReplyBounds()

    async def rerank(self, target: Target, request: RerankRequest) -> RerankReply:
        payload: dict[str, Any] = {
            "query": request.query,
            "documents": list(request.documents),
            "api_version": API_VERSION,
        }
        if request.top_n is not None:
            payload["top_n"] = request.top_n
        channel = target.channel
        with upstream_errors(channel):
            reply = await self._adapter.send(target, "invoke", payload)
            raw = await reply.read(self._bounds.max_reply_bytes)
            if reply.status >= 300:
                raise refusal(channel, reply.status, raw, secret(target), reply.headers)
            body = upstream_json.loads(raw)
        results = body.get("results") if isinstance(body, dict) else None
        return RerankReply(ranking(channel, results, len(request.documents), "relevance_score"))
