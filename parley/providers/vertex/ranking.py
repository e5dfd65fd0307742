"""Rerank on Google Cloud (``type: vertex``): the Vertex AI ranking API of Discovery
Engine, ``POST {base_url}/projects/{project}/locations/global/rankingConfigs/
default_ranking_config:rank`` with the channel's OAuth access token.

The API lives on its own host (``https://discoveryengine.googleapis.com/v1``), so a
ranking model is served by a ``vertex`` channel whose ``base_url`` is that root (its
project and service account as for any Vertex channel); the ranking config is the
project's default, in the ``global`` location. Each document goes as a record whose
``id`` is its index and ``content`` its text; the answer's records come back with
``id`` and ``score`` only (``ignoreRecordDetailsInResponse``). Google takes at most 200
records a call and reports no usage: the call is metered on Parley's count.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from parley import upstream_json
from parley.errors import UpstreamError
from parley.http import HttpClient, prepare
from parley.providers.base import (
    RERANK,
    ReplyBounds,
    RerankReply,
    RerankRequest,
    Serves,
    Target,
    upstream_errors,
)
from parley.providers.gemini.adapter import HEADERS
from parley.providers.gemini.refusal import google_refusal
from parley.providers.rankings import ranking
from parley.providers.vertex.channels import VertexChannels

LOCATION = "global"
RANKING_CONFIG = "default_ranking_config"


class VertexRanking:
    """``Rerank`` over the ranking API, with each channel's tokens (``VertexChannels``)."""

    __slots__ = ("_bounds", "_channels", "_http")
    serves: ClassVar[Serves] = (RERANK,)

    def __init__(
        self, http: HttpClient, bounds: ReplyBounds | None, channels: VertexChannels
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._channels = channels

    async def rerank(self, target: Target, request: RerankRequest) -> RerankReply:
        channel = self._channels.of(target)
        url = (
            f"{target.base_url}/projects/{channel.project}/locations/{LOCATION}"
            f"/rankingConfigs/{RANKING_CONFIG}:rank"
        )
        payload: dict[str, Any] = {
            "model": target.model,
            "query": request.query,
            "records": [
                {"id": str(index), "content": text} for index, text in enumerate(request.documents)
            ],
            "ignoreRecordDetailsInResponse": True,
        }
        if request.top_n is not None:
            payload["topN"] = request.top_n
        name = target.channel
        with upstream_errors(name):
            token = await channel.tokens.token()
            head = prepare("POST", url, {**HEADERS, "Authorization": f"Bearer {token}"})
            reply = await self._http.send(
                head,
                orjson.dumps(payload),
                connect_timeout=target.connect_timeout,
                read_timeout=target.read_timeout,
            )
            raw = await reply.read(self._bounds.max_reply_bytes)
            if reply.status >= 300:
                if reply.status == 401:  # the token was refused: the next call mints anew
                    channel.tokens.forget()
                raise google_refusal(name, reply.status, raw, None, reply.headers)
            body = upstream_json.loads(raw)
        records = body.get("records") if isinstance(body, dict) else None
        return RerankReply(ranking(name, _indexed(name, records), len(request.documents), "score"))


def _indexed(channel: str, records: Any) -> Any:
    """Google's records with their ``id`` read back as the document's index."""
    if not isinstance(records, list):
        return records
    indexed = []
    for record in records:
        if not isinstance(record, dict) or not str(record.get("id", "")).isdecimal():
            raise UpstreamError(
                f"The upstream channel `{channel}` sent a rerank reply that could not be "
                "read: a record's id is not one Parley sent."
            )
        indexed.append({"index": int(record["id"]), "score": record.get("score")})
    return indexed
