"""The adapter for rerank servers in Jina's dialect: ``POST {base_url}/rerank`` with a
Bearer key, ``{model, query, documents, top_n, return_documents}``.

Jina's own API (base URL ``https://api.jina.ai/v1``), vLLM and llama.cpp (base URL
ending in ``/v1``) and Infinity all answer ``results`` of ``{index, relevance_score}``
(vLLM always with the document, which Parley does not relay: the caller's own document
is returned when asked) and count tokens in ``usage`` (``prompt_tokens`` where given,
else ``total_tokens``: a rerank has no output tokens). The documents are never asked
back (``return_documents: false``), to keep the reply small.
"""

from __future__ import annotations

from typing import Any

from parley.http import HttpClient
from parley.providers.base import ReplyBounds, RerankReply, RerankRequest, Target
from parley.providers.rankings import RerankCaller, ranking, reported_count

RERANK_PATH = "/rerank"


class JinaRerank:
    """``Rerank`` in Jina's dialect."""

    __slots__ = ("_caller",)

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None = None) -> None:
        self._caller = RerankCaller(http, bounds)

    async def rerank(self, target: Target, request: RerankRequest) -> RerankReply:
        payload: dict[str, Any] = {
            "model": target.model,
            "query": request.query,
            "documents": list(request.documents),
            "return_documents": False,
        }
        if request.top_n is not None:
            payload["top_n"] = request.top_n
        reply = await self._caller.call(target, RERANK_PATH, payload)
        channel = target.channel
        if not isinstance(reply, dict):
            reply = {}
        results = ranking(channel, reply.get("results"), len(request.documents), "relevance_score")
        usage = reply.get("usage")
        tokens = None
        if isinstance(usage, dict):
            tokens = usage.get("prompt_tokens")
            if tokens is None:
                tokens = usage.get("total_tokens")
        return RerankReply(
            results, input_tokens=reported_count(tokens, channel) if tokens is not None else None
        )
