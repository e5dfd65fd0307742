"""What the rerank adapters share: one JSON call to an engine, and the reading of its
ranking.

Rerank engines speak three dialects (Cohere's v2, Jina's, which vLLM, llama.cpp and
Infinity also serve, and Hugging Face TEI's), but answer alike: a list of results, each
a document's ``index`` in the request and its score under some name. ``ranking`` reads
that list and refuses one Parley cannot trust (an index out of range or given twice, a
score that is not a finite number), so a caller never gets a ranking that points at the
wrong document. Errors come as OpenAI's envelope, FastAPI's ``{"detail": ...}``, TEI's
``{"error": "..."}`` or Cohere's ``{"message": ...}``; all become ``openai.refusal``'s
one ``UpstreamRefused``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from parley import upstream_json
from parley.domain.usage import reported_counts
from parley.errors import UpstreamError
from parley.http import HttpClient, prepare
from parley.providers.base import RankedDocument, ReplyBounds, Target, upstream_errors
from parley.providers.openai.refusal import refusal


class RerankCaller:
    """Holds the HTTP client and reply bounds; ``call`` sends one JSON request."""

    __slots__ = ("_bounds", "_http")

    def __init__(self, http: HttpClient, bounds: ReplyBounds | None = None) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()

    async def call(self, target: Target, path: str, payload: Mapping[str, Any]) -> Any:
        """POST ``payload`` to ``{base_url}{path}`` with the channel's key as a Bearer
        token; the JSON answer (any JSON value: TEI answers with an array), or its
        refusal raised in the error tree."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if target.api_key:
            headers["Authorization"] = f"Bearer {target.api_key}"
        with upstream_errors(target.channel):
            reply = await self._http.send(
                prepare("POST", f"{target.base_url}{path}", headers),
                orjson.dumps(payload),
                connect_timeout=target.connect_timeout,
                read_timeout=target.read_timeout,
            )
            raw = await reply.read(self._bounds.max_reply_bytes)
            if reply.status >= 300:
                raise refusal(
                    target.channel, reply.status, _enveloped(raw), target.api_key, reply.headers
                )
            return upstream_json.loads(raw)


def _enveloped(raw: bytes) -> bytes:
    """Cohere's ``{"message": ...}`` error as OpenAI's envelope, which ``refusal`` reads;
    any other body as it came."""
    try:
        body = upstream_json.loads(raw)
    except ValueError:
        return raw
    if isinstance(body, dict) and "error" not in body and isinstance(body.get("message"), str):
        return orjson.dumps({"error": {"message": body["message"]}})
    return raw


def ranking(channel: str, results: Any, documents: int, score: str) -> tuple[RankedDocument, ...]:
    """The results an engine sent (a list of objects with ``index`` and the ``score``
    field), checked against the request's ``documents`` count, best first."""
    if not isinstance(results, list):
        raise _unreadable(channel, "it holds no list of results")
    seen: set[int] = set()
    ranked: list[RankedDocument] = []
    for item in results:
        if not isinstance(item, dict):
            raise _unreadable(channel, "a result is not an object")
        index, value = item.get("index"), item.get(score, "")
        if type(index) is not int or not 0 <= index < documents or index in seen:
            raise _unreadable(channel, "a result's index is not one of the documents")
        if not _finite(value):
            raise _unreadable(channel, f"a result's {score} is not a number")
        seen.add(index)
        ranked.append(RankedDocument(index, float(value)))
    ranked.sort(key=lambda result: -result.relevance_score)
    return tuple(ranked)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def reported_count(value: Any, channel: str) -> int | None:
    """A count an engine reported (tokens, search units), validated as every upstream
    count is (``reported_counts``); a float with no fraction counts (Cohere's SDK types
    search units as floats); ``None`` when absent or not a count."""
    if type(value) is float and value.is_integer():
        value = int(value)
    counts = reported_counts(
        {"count": value}, source=f"the rerank channel `{channel}`", required=("count",)
    )
    return None if counts is None else counts["count"]


def _unreadable(channel: str, why: str) -> UpstreamError:
    return UpstreamError(
        f"The upstream channel `{channel}` sent a rerank reply that could not be read: {why}."
    )
