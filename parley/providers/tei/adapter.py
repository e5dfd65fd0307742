"""The adapter for Hugging Face TEI's rerank: ``POST {base_url}/rerank`` with
``{query, texts, truncate}``, answered by a bare array of ``{index, score}``.

A TEI server serves the one model it was started with, so no model is sent; it reports
no usage (the call is metered on Parley's estimate) and has no ``top_n`` (Parley trims
the ranking). ``truncate: true`` lets it cut a pair longer than the model takes rather
than refuse the whole call, as Cohere and Jina do.
"""

from __future__ import annotations

from parley.http import HttpClient
from parley.providers.base import ReplyBounds, RerankReply, RerankRequest, Target
from parley.providers.rankings import RerankCaller, ranking

RERANK_PATH = "/rerank"


class TEIRerank:
    """``Rerank`` over TEI's API."""

    __slots__ = ("_caller",)

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None = None) -> None:
        self._caller = RerankCaller(http, bounds)

    async def rerank(self, target: Target, request: RerankRequest) -> RerankReply:
        payload = {"query": request.query, "texts": list(request.documents), "truncate": True}
        reply = await self._caller.call(target, RERANK_PATH, payload)
        return RerankReply(ranking(target.channel, reply, len(request.documents), "score"))
