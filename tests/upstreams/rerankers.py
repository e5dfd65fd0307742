"""Fake rerank engines in their three dialects, written from each one's API reference.

* ``FakeCohere``: Cohere's ``POST /v2/rerank`` (Bearer key; ``{model, query, documents:
  [str], top_n?, max_tokens_per_doc?}``; ``{id, results: [{index, relevance_score}],
  meta: {api_version, billed_units: {search_units}}}``, no document text in v2; errors
  ``{"message": ...}``).
* ``FakeJina``: Jina's ``POST /v1/rerank`` (``{model, query, documents, top_n,
  return_documents}``, documents returned unless ``return_documents`` is false;
  ``{model, usage: {total_tokens, prompt_tokens}, results: [{index, relevance_score,
  document?: {text}}]}``; errors ``{"detail": ...}``). ``vllm=True`` answers as vLLM
  does: the document always in each result, an ``id``, ``usage`` with ``prompt_tokens``.
* ``FakeBedrockRerank``: Cohere's rerank on Amazon Bedrock, ``POST /model/{model
  id}/invoke`` signed with SigV4 (checked as ``FakeBedrock`` checks Converse calls;
  ``{query, documents, top_n?, api_version: 2}``, ``api_version`` required; Cohere's
  ``{id, results}``; errors named in ``x-amzn-ErrorType``). A model id ending in
  ``+fail-<Exception>`` answers with that exception.
* ``FakeVertexRanking``: Google's ranking API (Discovery Engine), ``POST
  /v1/projects/{p}/locations/global/rankingConfigs/default_ranking_config:rank`` with a
  token the ``FakeVertex`` it extends issued (``{model, query, records: [{id, title?,
  content?}], topN?, ignoreRecordDetailsInResponse?}``, at most 200 records, each with a
  title or a content; ``{records: [{id, score, content?}]}`` best first, scores rounded
  to 4 places; Google's error envelope).
* ``FakeTEI``: Hugging Face TEI's ``POST /rerank`` (no ``/v1``, no model: ``{query,
  texts, truncate?, raw_scores?, return_text?}``; a bare array of ``{index, score,
  text?}``, no usage, no ``top_n``; errors ``{"error", "error_type"}``).

Every fake scores a document by the share of the query's words it holds (a tie goes to
the earlier document), so tests know the ranking, and counts a token per word. Knobs:
``fail`` (a status to answer with instead), ``garbled`` (a result pointing past the
documents), ``usage`` (Jina/vLLM: send ``usage`` or not).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from tests.upstreams.bedrock import FakeBedrock, error_reply
from tests.upstreams.gemini import google_error
from tests.upstreams.server import FakeServer, authorized, json_reply, received
from tests.upstreams.vertex import FakeVertex

JSON = dict[str, Any]


def score(query: str, document: str) -> float:
    """The share of the query's words in the document, in [0, 1]."""
    words = set(query.lower().split())
    found = set(document.lower().split())
    return round(len(words & found) / len(words), 6) if words else 0.0


def ranked(query: str, documents: list[str]) -> list[tuple[int, float]]:
    """(index, score) of each document, best first, ties in the documents' order."""
    scores = [(index, score(query, text)) for index, text in enumerate(documents)]
    return sorted(scores, key=lambda pair: (-pair[1], pair[0]))


def words(text: str) -> int:
    return len(text.split())


@dataclass
class _Fake(FakeServer):
    api_key: str | None = None
    fail: int | None = None
    garbled: bool = False
    usage: bool = True

    async def _read(self, request: web.Request) -> tuple[JSON | None, web.Response | None]:
        body = await request.json()
        self.requests.append(received(request, body))
        if not authorized(request, self.api_key):
            return None, self._error(401, "invalid api token")
        if self.fail is not None:
            return None, self._error(self.fail, "the engine is unavailable")
        return body, None

    def _error(self, status: int, message: str) -> web.Response:
        raise NotImplementedError


@dataclass
class FakeCohere(_Fake):
    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v2/rerank", self._rerank)
        return app

    def _error(self, status: int, message: str) -> web.Response:
        return json_reply(status, {"message": message})

    async def _rerank(self, request: web.Request) -> web.Response:
        body, refused = await self._read(request)
        if refused is not None or body is None:
            return refused or self._error(400, "invalid request")
        documents = body.get("documents")
        if not isinstance(documents, list) or not all(isinstance(d, str) for d in documents):
            return self._error(400, "invalid request: documents must be a list of strings")
        if not isinstance(body.get("model"), str) or not isinstance(body.get("query"), str):
            return self._error(400, "invalid request: model and query are required")
        order = ranked(body["query"], documents)
        top_n = body.get("top_n")
        if top_n is not None:
            order = order[:top_n]
        results = [{"index": index, "relevance_score": value} for index, value in order]
        if self.garbled:
            results.append({"index": len(documents), "relevance_score": 0.1})
        units = -(-len(documents) // 100)
        return json_reply(
            200,
            {
                "id": "07734bd2-2473-4f07-94e1-0d9f0e6843cf",
                "results": results,
                "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": units}},
            },
        )


@dataclass
class FakeJina(_Fake):
    vllm: bool = False

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/rerank", self._rerank)
        return app

    def _error(self, status: int, message: str) -> web.Response:
        return json_reply(status, {"detail": message})

    async def _rerank(self, request: web.Request) -> web.Response:
        body, refused = await self._read(request)
        if refused is not None or body is None:
            return refused or self._error(400, "invalid request")
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not isinstance(documents, list) or not documents:
            return self._error(422, "query and documents are required")
        texts = [d if isinstance(d, str) else d.get("text", "") for d in documents]
        order = ranked(query, texts)
        top_n = body.get("top_n")
        if top_n:
            order = order[:top_n]
        with_documents = self.vllm or body.get("return_documents", True)
        results = []
        for index, value in order:
            result: JSON = {"index": index, "relevance_score": value}
            if with_documents:
                result["document"] = {"text": texts[index]}
            results.append(result)
        if self.garbled:
            results.append({"index": 0, "relevance_score": "high"})
        tokens = sum(words(query) + words(text) for text in texts)
        reply: JSON = {"model": body.get("model"), "results": results}
        if self.vllm:
            reply["id"] = "rerank-8d1c0f"
        if self.usage:
            reply["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
        return json_reply(200, reply)


@dataclass
class FakeTEI(_Fake):
    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/rerank", self._rerank)
        return app

    def _error(self, status: int, message: str) -> web.Response:
        return json_reply(status, {"error": message, "error_type": "Validation"})

    async def _rerank(self, request: web.Request) -> web.Response:
        body, refused = await self._read(request)
        if refused is not None or body is None:
            return refused or self._error(422, "invalid request")
        query, texts = body.get("query"), body.get("texts")
        if not isinstance(query, str) or not isinstance(texts, list) or not texts:
            return self._error(422, "`texts` cannot be empty")
        ranks = []
        for index, value in ranked(query, texts):
            rank: JSON = {"index": index, "score": value}
            if body.get("return_text"):
                rank["text"] = texts[index]
            ranks.append(rank)
        if self.garbled:
            ranks.append(dict(ranks[0]))  # an index given twice
        return json_reply(200, ranks)


@dataclass
class FakeBedrockRerank(FakeBedrock):
    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._invoke)
        return app

    async def _invoke(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: Any = orjson.loads(raw)
        self.requests.append(received(request, body))
        refused = self._check_signature(request, raw)
        if refused is not None:
            return refused
        parts = request.raw_path.split("/")
        if len(parts) != 4 or parts[1] != "model" or parts[3] != "invoke":
            return error_reply("UnknownOperationException", "Unknown operation", 404)
        failure = self.behaviour.with_model(unquote(parts[2])).fail
        if failure is not None:
            return error_reply(failure, f"Fake failure ({failure}).")
        documents = body.get("documents")
        if body.get("api_version") != 2:
            return error_reply("ValidationException", "api_version must be 2")
        if not isinstance(documents, list) or not all(isinstance(d, str) for d in documents):
            return error_reply("ValidationException", "documents must be strings")
        order = ranked(body["query"], documents)[: body.get("top_n") or len(documents)]
        results = [{"index": index, "relevance_score": value} for index, value in order]
        return json_reply(200, {"id": "bedrock-rerank-1", "results": results})


@dataclass
class FakeVertexRanking(FakeVertex):
    def application(self) -> web.Application:
        app = super().application()
        app.router.add_post(
            "/v1/projects/{project}/locations/{location}/rankingConfigs/{call}", self._rank
        )
        return app

    async def _rank(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(received(request, body))
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.tokens.get(token, 0) <= time.time():
            return json_reply(401, google_error(401, "Request had invalid credentials."))
        info = request.match_info
        if (info["project"], info["location"], info["call"]) != (
            self.project, "global", "default_ranking_config:rank"):  # fmt: skip
            return json_reply(404, google_error(404, "Ranking config not found."))
        records = body.get("records")
        if not isinstance(records, list) or not 0 < len(records) <= 200:
            return json_reply(400, google_error(400, "At most 200 records to rank."))
        if not all(record.get("title") or record.get("content") for record in records):
            return json_reply(400, google_error(400, "A record needs a title or a content."))
        texts = [f"{r.get('title', '')} {r.get('content', '')}".strip() for r in records]
        order = ranked(body.get("query", ""), texts)[: body.get("topN") or len(records)]
        ranked_records = []
        for index, value in order:
            record: JSON = {"id": records[index]["id"], "score": round(value, 4)}
            if not body.get("ignoreRecordDetailsInResponse"):
                record["content"] = records[index].get("content", "")
            ranked_records.append(record)
        return json_reply(200, {"records": ranked_records})
