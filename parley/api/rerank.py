"""POST /v1/rerank and /v2/rerank: documents ranked by relevance to a query, from
``kind: rerank`` models, through the runner.

The request is the shape Cohere, Jina, vLLM and TEI's callers share: ``model``,
``query``, ``documents`` (at most ``MAX_DOCUMENTS``), ``top_n`` (0 or absent: all) and
``return_documents`` (default false, as Cohere's). A document is a string, or an object
ranked by its text: its ``text`` field, or, when the request names ``rank_fields``
(Cohere's v1 field), those fields as ``name: value`` lines in that order. Any other field
is a 400 naming it: nothing the caller asked for is dropped silently.

The reply merges the dialects: ``results`` of ``{index, relevance_score}`` best first (at
most ``top_n``, trimmed by Parley when the engine does not), each with ``document`` when
asked (the caller's own: ``{"text": ...}`` for a string, the object as sent), Cohere's
``meta.billed_units.search_units`` and OpenAI-style ``usage`` (input tokens).

Metering: search units are what the engine billed (Cohere's ``billed_units``), or else
Parley's count, one per 100 documents started (Cohere's unit), and never more than that
count; input tokens are what the engine reported (Jina's and vLLM's ``usage``), or else
Parley's estimate of every (query, document) pair, marked estimated. The model's prices
say what is paid: ``per_search_unit``, ``input_per_1k``, or both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from parley.api.body import read_json, required_string
from parley.domain.models import Resolved
from parley.domain.tokens import estimate_text, prompt_ceiling
from parley.domain.usage import Allowance, Usage, with_estimate
from parley.errors import InvalidRequest
from parley.pipeline import runner
from parley.pipeline.authenticate import Caller
from parley.pipeline.call import Call
from parley.pipeline.context import services
from parley.pipeline.job import Operation
from parley.pipeline.route import Route
from parley.providers.base import RerankReply, RerankRequest
from parley.providers.registry import ProviderRegistry

RERANK_KINDS = frozenset({"rerank"})
RERANK_V1 = Operation("rerank", "/v1/rerank", RERANK_KINDS)
RERANK_V2 = Operation("rerank", "/v2/rerank", RERANK_KINDS)
MAX_DOCUMENTS = 1000
"""Cohere's recommended most; it also bounds the call's worst case."""
DOCUMENTS_PER_SEARCH_UNIT = 100
PAIR_TOKENS = 16
"""Tokens an engine may add around each (query, document) pair it scores (separators, a
template), on top of their own text, in the call's ceiling."""
FIELDS = frozenset({"model", "query", "documents", "top_n", "return_documents", "rank_fields"})


async def rerank_v1(request: web.Request) -> web.StreamResponse:
    return await _rerank(request, RERANK_V1)


async def rerank_v2(request: web.Request) -> web.StreamResponse:
    return await _rerank(request, RERANK_V2)


async def _rerank(request: web.Request, operation: Operation) -> web.StreamResponse:
    body = await read_json(request)
    size = len(await request.read())  # the body read once, kept by aiohttp
    job = RerankJob(operation, parse_rerank(body), services(request).providers, size)
    return await runner.reply(request, job)


@dataclass(frozen=True, slots=True)
class Ranking:
    """A rerank request, checked: the engine's part (``request``) and the caller's."""

    model: str
    request: RerankRequest
    documents: tuple[Any, ...]
    """The documents as the caller sent them, returned when asked."""
    return_documents: bool


def parse_rerank(body: dict[str, Any]) -> Ranking:
    """Check the request's fields (a 400 naming the first wrong one)."""
    for name in body:
        if name not in FIELDS:
            raise InvalidRequest(f"Unrecognized request argument supplied: '{name}'.", param=name)
    model = required_string(body, "model")
    query = required_string(body, "query")
    documents = body.get("documents")
    if documents is None:
        raise InvalidRequest("Missing required parameter: 'documents'.", param="documents")
    if not isinstance(documents, list) or not documents:
        raise InvalidRequest("'documents' must be a non-empty array.", param="documents")
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidRequest(
            f"'documents' may hold at most {MAX_DOCUMENTS} items.", param="documents"
        )
    fields = _rank_fields(body.get("rank_fields"))
    texts = tuple(_text(document, index, fields) for index, document in enumerate(documents))
    top_n = body.get("top_n")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 0):
        raise InvalidRequest("'top_n' must be a non-negative integer.", param="top_n")
    returned = body.get("return_documents", False)
    if not isinstance(returned, bool):
        raise InvalidRequest(
            "'return_documents' must be a boolean (true or false).", param="return_documents"
        )
    wanted = top_n if top_n and top_n < len(texts) else None
    return Ranking(model, RerankRequest(query, texts, wanted), tuple(documents), returned)


def _rank_fields(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(name, str) and name for name in value)
    ):
        raise InvalidRequest(
            "'rank_fields' must be a non-empty array of field names.", param="rank_fields"
        )
    return tuple(value)


def _text(document: Any, index: int, fields: tuple[str, ...] | None) -> str:
    """The text a document is ranked by (see the module's docstring)."""
    where = f"documents[{index}]"
    if isinstance(document, str):
        return document
    if not isinstance(document, dict):
        raise InvalidRequest(f"'{where}' must be a string or an object.", param=where)
    if fields is None:
        text = document.get("text")
        if not isinstance(text, str):
            raise InvalidRequest(
                f"'{where}' must have a 'text' string (or name its fields in 'rank_fields').",
                param=where,
            )
        return text
    lines = []
    for name in fields:
        value = document.get(name)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise InvalidRequest(
                f"'{where}.{name}' must be a string or a number (it is in 'rank_fields').",
                param=f"{where}.{name}",
            )
        lines.append(f"{name}: {value}")
    return "\n".join(lines)


class RerankJob:
    """One rerank call: a ``ReplyJob`` for the runner."""

    __slots__ = ("_ceiling", "_estimate", "_providers", "_ranking", "_units", "operation")

    def __init__(
        self,
        operation: Operation,
        ranking: Ranking,
        providers: ProviderRegistry,
        body_bytes: int,
    ) -> None:
        self.operation = operation
        self._ranking = ranking
        self._providers = providers
        request = ranking.request
        count = len(request.documents)
        query = estimate_text(request.query)
        self._estimate = max(1, sum(query + estimate_text(text) for text in request.documents))
        self._units = -(-count // DOCUMENTS_PER_SEARCH_UNIT)
        query_bytes = len(request.query.encode())
        pairs = prompt_ceiling(body_bytes + count * (query_bytes + PAIR_TOKENS))
        self._ceiling = max(self._estimate, pairs)

    @property
    def model(self) -> str:
        return self._ranking.model

    def accept(self, model: Resolved) -> None:
        return None

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return self._estimate

    def allowance(self, model: Resolved) -> Allowance:
        return Allowance(prompt_tokens=self._ceiling, search_units=self._units)

    async def call(self, route: Route) -> RerankReply:
        adapter = self._providers.rerank(route.provider_type)
        return await adapter.rerank(route.target, self._ranking.request)

    def usage(self, reply: RerankReply) -> Usage:
        units = self._units if reply.search_units is None else reply.search_units
        if reply.input_tokens is None:
            return Usage(prompt_tokens=self._estimate, estimated=True, search_units=units)
        estimate = Usage(prompt_tokens=self._estimate, estimated=True, search_units=self._units)
        return with_estimate(Usage(prompt_tokens=reply.input_tokens, search_units=units), estimate)

    def render(self, reply: RerankReply, call: Call, usage: Usage) -> web.StreamResponse:
        ranking = self._ranking
        wanted = ranking.request.top_n
        results = reply.results if wanted is None else reply.results[:wanted]
        rows = []
        for result in results:
            row: dict[str, Any] = {"index": result.index, "relevance_score": result.relevance_score}
            if ranking.return_documents:
                document = ranking.documents[result.index]
                row["document"] = {"text": document} if isinstance(document, str) else document
            rows.append(row)
        version = "2" if self.operation is RERANK_V2 else "1"
        body = {
            "id": call.request_id,
            "model": call.model.spec.name,
            "results": rows,
            "meta": {
                "api_version": {"version": version},
                "billed_units": {"search_units": usage.search_units},
            },
            "usage": {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.total_tokens},
        }
        return web.Response(body=orjson.dumps(body), content_type="application/json")
