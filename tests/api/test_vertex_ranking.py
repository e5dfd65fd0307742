"""Rerank on a ``type: vertex`` channel: Google's ranking API (Discovery Engine) with an
access token minted from the channel's service account, as for every Vertex call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.api.harness import Gateway, call, local_state, records, starting
from tests.api.test_vertex_channel import EMAIL, make_key, service_account
from tests.upstreams.rerankers import FakeVertexRanking, ranked

QUERY = "capital of france"
DOCUMENTS = ["Berlin is the capital of Germany", "Paris is the capital of France", "Lyon"]


@pytest.fixture(scope="module")
def key_pair() -> rsa.RSAPrivateKey:
    return make_key()


@pytest.fixture
async def ranking(key_pair: rsa.RSAPrivateKey) -> AsyncIterator[FakeVertexRanking]:
    async with FakeVertexRanking(key_pair.public_key(), EMAIL) as running:
        yield running


@pytest.fixture
async def gateway(
    ranking: FakeVertexRanking, key_pair: rsa.RSAPrivateKey, tmp_path: Path
) -> AsyncIterator[Gateway]:
    credentials = service_account(key_pair, ranking.token_uri, tmp_path / "account.json")

    def config() -> dict[str, Any]:
        return {
            **local_state(tmp_path),
            "channels": [
                {
                    "name": "gcp-ranking",
                    "type": "vertex",
                    "base_url": ranking.base_url,
                    "vertex": {"project": ranking.project, "region": ranking.region,
                               "credentials_file": str(credentials)},
                    "models": [{"name": "semantic-ranker",
                                "upstream": "semantic-ranker-default@latest"}],
                    "timeouts": {"connect": 2, "read": 5},
                }
            ],
            "models": [{"name": "semantic-ranker", "kind": "rerank",
                        "prices": {"per_search_unit": "0.001"}}],
        }  # fmt: skip

    async with starting(config) as start:
        yield await start()


async def test_a_rerank_reaches_googles_ranking_api_with_a_minted_token(
    gateway: Gateway, ranking: FakeVertexRanking
) -> None:
    key = await gateway.key(await gateway.group("team"))
    body = {"model": "semantic-ranker", "query": QUERY, "documents": DOCUMENTS, "top_n": 2,
            "return_documents": True}  # fmt: skip
    status, reply = await call(gateway, "POST", "/v1/rerank", key, json=body)
    assert status == 200, reply
    best = ranked(QUERY, DOCUMENTS)[:2]
    assert [(r["index"], r["relevance_score"]) for r in reply["results"]] == [
        (index, round(score, 4)) for index, score in best
    ]
    assert reply["results"][0]["document"] == {"text": DOCUMENTS[1]}
    sent = ranking.last_request
    assert sent.path == (
        f"/v1/projects/{ranking.project}/locations/global/rankingConfigs/"
        "default_ranking_config:rank"
    )
    assert sent.body == {
        "model": "semantic-ranker-default@latest",
        "query": QUERY,
        "records": [{"id": str(n), "content": text} for n, text in enumerate(DOCUMENTS)],
        "ignoreRecordDetailsInResponse": True,
        "topN": 2,
    }
    assert ranking.mints == 1
    (record,) = await records(gateway)
    assert (record.search_units, record.cost_nanos, record.estimated) == (1, 1_000_000, True)


async def test_googles_refusal_is_relayed(gateway: Gateway, ranking: FakeVertexRanking) -> None:
    key = await gateway.key(await gateway.group("team"))
    body = {"model": "semantic-ranker", "query": QUERY, "documents": ["a"] * 201}
    status, reply = await call(gateway, "POST", "/v2/rerank", key, json=body)
    assert status == 400, reply
    assert reply["error"]["message"] == "At most 200 records to rank."
