"""The adapter for Cohere's v2 rerank (``POST {base_url}/v2/rerank``, a Bearer key).

Cohere takes the documents as strings and ``top_n``; it returns ``results`` of
``{index, relevance_score}`` (no document text in v2) and bills in
``meta.billed_units.search_units``, which the adapter reports with the input tokens
where Cohere states them (``billed_units.input_tokens``, else ``meta.tokens``).
"""

from __future__ import annotations

from typing import Any

from parley.http import HttpClient
from parley.providers.base import ReplyBounds, RerankReply, RerankRequest, Target
from parley.providers.rankings import RerankCaller, ranking, reported_count

RERANK_PATH = "/v2/rerank"


class CohereRerank:
    """``Rerank`` over Cohere's v2 API."""

    __slots__ = ("_caller",)

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None = None) -> None:
        self._caller = RerankCaller(http, bounds)

    async def rerank(self, target: Target, request: RerankRequest) -> RerankReply:
        payload: dict[str, Any] = {
            "model": target.model,
            "query": request.query,
            "documents": list(request.documents),
        }
        if request.top_n is not None:
            payload["top_n"] = request.top_n
        reply = await self._caller.call(target, RERANK_PATH, payload)
        channel = target.channel
        if not isinstance(reply, dict):
            reply = {}
        results = ranking(channel, reply.get("results"), len(request.documents), "relevance_score")
        meta = _object(reply.get("meta"))
        billed = _object(meta.get("billed_units"))
        tokens = billed.get("input_tokens")
        if tokens is None:
            tokens = _object(meta.get("tokens")).get("input_tokens")
        return RerankReply(
            results,
            input_tokens=reported_count(tokens, channel) if tokens is not None else None,
            search_units=reported_count(billed.get("search_units"), channel),
        )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
