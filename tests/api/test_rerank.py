"""POST /v1/rerank and /v2/rerank: through the runner to Cohere, Jina, vLLM and TEI
channels (fakes written from each one's API reference), billed per search unit or per
token, with the same access, limits, failover and request log as every call. Clients:
Cohere's own Python SDK (v2) and raw HTTP in Jina's shape."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import cohere
import pytest

from parley.api.rerank import MAX_DOCUMENTS
from tests.api.admin_client import ADMIN, browser_session, login
from tests.api.harness import CHANNEL_KEY, Config, Gateway, StartGateway, call, records
from tests.upstreams.bedrock import AwsKeys
from tests.upstreams.rerankers import FakeBedrockRerank, FakeCohere, FakeJina, FakeTEI, ranked

QUERY = "capital of france"
DOCUMENTS = [
    "Berlin is the capital of Germany",
    "Paris is the capital of France",
    "France grows wine",
    "Madrid is sunny",
]
BEST_FIRST = [index for index, _ in ranked(QUERY, DOCUMENTS)]  # [1, 0, 2, 3]
PER_SEARCH_UNIT = 2_000_000  # $0.002 in nano-dollars
PER_TOKEN = 20  # $0.00002 per 1K tokens
AWS = AwsKeys("AKIARERANK0000", "rerank/secret/key", "session-token-1")
COHERE_ON_BEDROCK = "cohere.rerank-v3-5:0"


class Fakes:
    def __init__(self) -> None:
        self.cohere = FakeCohere(api_key=CHANNEL_KEY)
        self.jina = FakeJina(api_key=CHANNEL_KEY)
        self.vllm = FakeJina(api_key=CHANNEL_KEY, vllm=True)
        self.tei = FakeTEI()
        self.down = FakeCohere(api_key=CHANNEL_KEY, fail=503)
        self.bedrock = FakeBedrockRerank(credentials=AWS, region="eu-west-1")

    def all(self) -> tuple[Any, ...]:
        return (self.cohere, self.jina, self.vllm, self.tei, self.down, self.bedrock)


@pytest.fixture
async def fakes() -> AsyncIterator[Fakes]:
    found = Fakes()
    for fake in found.all():
        await fake.start()
    yield found
    for fake in found.all():
        await fake.stop()


def channel(name: str, kind: str, url: str, models: list[Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "base_url": url, "api_key": CHANNEL_KEY,
            "models": models, "timeouts": {"connect": 2, "read": 5}, **extra}  # fmt: skip


def with_rerankers(fakes: Fakes) -> Any:
    def tweak(config: Config) -> None:
        config["channels"] += [
            channel("cohere", "cohere", fakes.cohere.endpoint,
                    [{"name": "rerank-english", "upstream": "rerank-v3.5"}]),
            channel("jina", "jina", fakes.jina.base_url,
                    [{"name": "jina-reranker", "upstream": "jina-reranker-v2-base"},
                     "rerank-failover"]),
            channel("vllm", "vllm", fakes.vllm.base_url,
                    [{"name": "bge-reranker", "upstream": "BAAI/bge-reranker-v2-m3"}]),
            channel("tei", "tei", fakes.tei.endpoint, ["tei-reranker"]),
            channel("cohere-down", "cohere", fakes.down.endpoint, ["rerank-failover"],
                    priority=5),
            channel("aws", "bedrock", fakes.bedrock.endpoint,
                    [{"name": "rerank-bedrock", "upstream": COHERE_ON_BEDROCK},
                     {"name": "rerank-bedrock-busy",
                      "upstream": f"{COHERE_ON_BEDROCK}+fail-ValidationException"}],
                    aws={"region": "eu-west-1", "access_key_id": AWS.access_key_id,
                         "secret_access_key": AWS.secret_access_key,
                         "session_token": AWS.session_token}),
        ]  # fmt: skip
        config["models"] += [
            {"name": "rerank-english", "kind": "rerank", "prices": {"per_search_unit": "0.002"}},
            {"name": "jina-reranker", "kind": "rerank", "prices": {"input_per_1k": "0.00002"}},
            {"name": "bge-reranker", "kind": "rerank"},
            {"name": "tei-reranker", "kind": "rerank",
             "prices": {"per_search_unit": "0.002", "input_per_1k": "0.00002"}},
            {"name": "rerank-failover", "kind": "rerank", "prices": {"per_search_unit": "0.002"}},
            {"name": "rerank-bedrock", "kind": "rerank", "prices": {"per_search_unit": "0.002"}},
            {"name": "rerank-bedrock-busy", "kind": "rerank"},
        ]  # fmt: skip
        config["capabilities"]["RERANK"] = "rerank-english"

    return tweak


@pytest.fixture
async def gateway(start_gateway: StartGateway, fakes: Fakes) -> Gateway:
    return await start_gateway(with_rerankers(fakes))


async def rerank(
    gateway: Gateway, key: str | None, body: dict[str, Any], path: str = "/v1/rerank"
) -> tuple[int, Any]:
    return await call(gateway, "POST", path, key, json=body)


async def test_cohere_sdk_reranks_over_v2_billed_per_search_unit(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    client = cohere.AsyncClientV2(api_key=key, base_url=gateway.base_url)
    reply = await client.rerank(model="rerank-english", query=QUERY, documents=DOCUMENTS, top_n=2)
    assert [result.index for result in reply.results] == BEST_FIRST[:2]
    assert reply.results[0].relevance_score == 1.0
    assert reply.meta is not None and reply.meta.billed_units is not None
    assert reply.meta.billed_units.search_units == 1

    sent = fakes.cohere.last_request
    assert (sent.path, sent.authorization) == ("/v2/rerank", f"Bearer {CHANNEL_KEY}")
    assert sent.body == {"model": "rerank-v3.5", "query": QUERY, "documents": DOCUMENTS,
                         "top_n": 2}  # fmt: skip

    (record,) = await records(gateway)
    assert (record.endpoint, record.model, record.channel, record.status) == (
        "/v2/rerank", "rerank-english", "cohere", 200)  # fmt: skip
    assert record.search_units == 1
    assert record.cost_nanos == PER_SEARCH_UNIT
    assert record.estimated  # Cohere states no tokens: Parley's estimate is kept
    assert reply.id == record.request_id


async def test_jina_shape_over_raw_http_with_object_documents(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    documents: list[Any] = [{"text": text, "id": f"doc-{n}"} for n, text in enumerate(DOCUMENTS)]
    documents[3] = DOCUMENTS[3]  # strings and objects mix
    body = {"model": "jina-reranker", "query": QUERY, "documents": documents, "top_n": 3,
            "return_documents": True}  # fmt: skip
    status, reply = await rerank(gateway, key, body)
    assert status == 200, reply
    assert [result["index"] for result in reply["results"]] == BEST_FIRST[:3]
    # the caller's own documents come back, not the engine's copy
    assert reply["results"][0]["document"] == {"text": DOCUMENTS[1], "id": "doc-1"}
    tokens = sum(len(QUERY.split()) + len(text.split()) for text in DOCUMENTS)
    assert reply["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}
    assert reply["meta"]["billed_units"] == {"search_units": 1}
    assert reply["model"] == "jina-reranker"

    sent = fakes.jina.last_request
    assert sent.path == "/v1/rerank"
    assert sent.body["documents"] == DOCUMENTS  # objects sent as their text
    assert (sent.body["model"], sent.body["return_documents"]) == ("jina-reranker-v2-base", False)

    (record,) = await records(gateway)
    assert (record.prompt_tokens, record.search_units, record.estimated) == (tokens, 1, False)
    assert record.cost_nanos == tokens * PER_TOKEN
    assert record.endpoint == "/v1/rerank"


async def test_vllm_and_tei_dialects(gateway: Gateway, key: str, fakes: Fakes) -> None:
    body = {"model": "bge-reranker", "query": QUERY, "documents": DOCUMENTS}
    status, reply = await rerank(gateway, key, body)
    assert status == 200, reply
    assert [result["index"] for result in reply["results"]] == BEST_FIRST
    assert all("document" not in result for result in reply["results"])  # not asked for
    assert fakes.vllm.last_request.path == "/v1/rerank"
    assert fakes.vllm.last_request.body["model"] == "BAAI/bge-reranker-v2-m3"

    # TEI has no top_n: Parley trims; it names no model and reports no usage
    body = {"model": "tei-reranker", "query": QUERY, "documents": DOCUMENTS, "top_n": 1,
            "return_documents": True}  # fmt: skip
    status, reply = await rerank(gateway, key, body, path="/v2/rerank")
    assert status == 200, reply
    assert reply["results"] == [
        {"index": 1, "relevance_score": 1.0, "document": {"text": DOCUMENTS[1]}}
    ]
    sent = fakes.tei.last_request
    assert sent.path == "/rerank"
    assert sent.body == {"query": QUERY, "texts": DOCUMENTS, "truncate": True}
    _, tei = sorted(await records(gateway), key=lambda record: record.model)
    assert tei.model == "tei-reranker" and tei.estimated
    assert tei.prompt_tokens == reply["usage"]["prompt_tokens"] > 0
    assert tei.cost_nanos == PER_SEARCH_UNIT + tei.prompt_tokens * PER_TOKEN


async def test_search_units_count_each_hundred_documents(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    documents = [f"document number {n}" for n in range(250)]
    body = {"model": "tei-reranker", "query": "number 7", "documents": documents, "top_n": 0}
    status, reply = await rerank(gateway, key, body)
    assert status == 200, reply
    assert len(reply["results"]) == 250  # top_n 0: all
    assert reply["meta"]["billed_units"]["search_units"] == 3
    (record,) = await records(gateway)
    assert record.search_units == 3


async def test_rank_fields_turn_objects_into_text(gateway: Gateway, key: str, fakes: Fakes) -> None:
    documents = [{"title": "Madrid", "body": "sunny"}, {"title": "Paris", "body": "capital"}]
    body = {"model": "bge-reranker", "query": "paris capital", "documents": documents,
            "rank_fields": ["title", "body"], "return_documents": True}  # fmt: skip
    status, reply = await rerank(gateway, key, body)
    assert status == 200, reply
    assert fakes.vllm.last_request.body["documents"] == [
        "title: Madrid\nbody: sunny", "title: Paris\nbody: capital"]  # fmt: skip
    assert reply["results"][0] == {"index": 1, "relevance_score": 1.0, "document": documents[1]}


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"query": None}, "query"),
        ({"query": ""}, "query"),
        ({"model": None}, "model"),
        ({"documents": None}, "documents"),
        ({"documents": []}, "documents"),
        ({"documents": "one"}, "documents"),
        ({"documents": ["a"] * (MAX_DOCUMENTS + 1)}, "documents"),
        ({"documents": ["a", 5]}, "documents[1]"),
        ({"documents": [{"title": "no text"}]}, "documents[0]"),
        ({"documents": [{"a": [1]}], "rank_fields": ["a"]}, "documents[0].a"),
        ({"rank_fields": "title"}, "rank_fields"),
        ({"top_n": -1}, "top_n"),
        ({"top_n": True}, "top_n"),
        ({"return_documents": "yes"}, "return_documents"),
        ({"max_chunks_per_doc": 10}, "max_chunks_per_doc"),
    ],
)
async def test_a_bad_field_is_a_400_naming_it(
    gateway: Gateway, key: str, fakes: Fakes, change: dict[str, Any], param: str
) -> None:
    body: dict[str, Any] = {"model": "rerank-english", "query": QUERY, "documents": DOCUMENTS}
    body.update(change)
    body = {name: value for name, value in body.items() if value is not None}
    status, reply = await rerank(gateway, key, body, path="/v2/rerank")
    assert status == 400, reply
    assert reply["error"]["param"] == param
    assert reply["error"]["type"] == "invalid_request_error"
    assert fakes.cohere.requests == []


async def test_access_kinds_and_authentication(gateway: Gateway, fakes: Fakes) -> None:
    body = {"model": "rerank-english", "query": QUERY, "documents": DOCUMENTS}
    status, reply = await rerank(gateway, None, body, path="/v2/rerank")
    assert status == 401
    chat_only = await gateway.key(await gateway.group("chat-only", models=["chat-large"]))
    status, reply = await rerank(gateway, chat_only, body)
    assert (status, reply["error"]["code"]) == (404, "model_not_found")
    key = await gateway.key(await gateway.group("team"))
    status, reply = await rerank(gateway, key, {**body, "model": "chat-large"})
    assert (status, reply["error"]["code"]) == (400, "model_not_supported")
    status, reply = await call(
        gateway, "POST", "/v1/chat/completions", key,
        json={"model": "rerank-english", "messages": [{"role": "user", "content": "hi"}]},
    )  # fmt: skip
    assert (status, reply["error"]["code"]) == (400, "model_not_supported")
    assert fakes.cohere.requests == []


async def test_limits_and_the_worst_case_budget_hold(gateway: Gateway, fakes: Fakes) -> None:
    body = {"model": "rerank-english", "query": QUERY, "documents": DOCUMENTS}
    key = await gateway.key(await gateway.group("slow", rpm=1))
    assert (await rerank(gateway, key, body))[0] == 200
    status, reply = await rerank(gateway, key, body)
    assert (status, reply["error"]["code"]) == (429, "rate_limit_exceeded")
    # a budget of one search unit: the first call spends it, the next is refused
    poor = await gateway.key(await gateway.group("poor", budget_nanos=PER_SEARCH_UNIT))
    assert (await rerank(gateway, poor, body))[0] == 200
    status, reply = await rerank(gateway, poor, body)
    assert (status, reply["error"]["code"]) == (429, "insufficient_quota")
    # the call's tokens are reserved against the token rate: more than it holds is refused
    narrow = await gateway.key(await gateway.group("narrow", tpm=20))
    status, reply = await rerank(gateway, narrow, body)  # about 45 tokens
    assert (status, reply["error"]["code"]) == (429, "rate_limit_exceeded")
    assert "too large" in reply["error"]["message"]
    assert len(fakes.cohere.requests) == 2


async def test_a_failed_channel_falls_over_to_the_next(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    body = {"model": "rerank-failover", "query": QUERY, "documents": DOCUMENTS}
    status, reply = await rerank(gateway, key, body)
    assert status == 200, reply
    assert [result["index"] for result in reply["results"]] == BEST_FIRST
    assert len(fakes.down.requests) == 1
    assert fakes.jina.last_request.body["model"] == "rerank-failover"
    (record,) = await records(gateway)
    assert (record.channel, record.status, record.search_units) == ("jina", 200, 1)


@pytest.mark.parametrize("dialect", ["cohere", "jina", "tei"])
async def test_a_ranking_that_cannot_be_trusted_is_a_502_not_billed(
    gateway: Gateway, key: str, fakes: Fakes, dialect: str
) -> None:
    getattr(fakes, dialect).garbled = True
    model = {"cohere": "rerank-english", "jina": "jina-reranker", "tei": "tei-reranker"}[dialect]
    status, reply = await rerank(gateway, key, {"model": model, "query": QUERY,
                                                "documents": DOCUMENTS})  # fmt: skip
    assert status == 502, reply
    assert "could not be read" in reply["error"]["message"]
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (502, 0)


async def test_an_upstream_rejection_is_relayed_without_its_key(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    fakes.cohere.fail = 422
    body = {"model": "rerank-english", "query": QUERY, "documents": DOCUMENTS}
    status, reply = await rerank(gateway, key, body)
    assert status == 422, reply
    assert reply["error"]["message"] == "the engine is unavailable"
    assert CHANNEL_KEY not in str(reply)


async def test_models_and_capabilities_list_the_rerank_kind(gateway: Gateway, key: str) -> None:
    status, models = await call(gateway, "GET", "/v1/models/rerank-english", key)
    assert status == 200
    assert (models["kind"], models["endpoints"]) == ("rerank", ["/v1/rerank", "/v2/rerank"])
    assert models["pricing"]["per_search_unit"] == 0.002
    status, capabilities = await call(gateway, "GET", "/v1/capabilities", key)
    assert status == 200
    (entry,) = [item for item in capabilities["data"] if item["key"] == "RERANK"]
    assert (entry["model"], entry["kind"]) == ("rerank-english", "rerank")


async def test_cohere_rerank_on_bedrock_signed_through_invoke_model(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    body = {"model": "rerank-bedrock", "query": QUERY, "documents": DOCUMENTS, "top_n": 2}
    status, reply = await rerank(gateway, key, body, path="/v2/rerank")
    assert status == 200, reply  # the fake refuses a call whose SigV4 signature is wrong
    assert [result["index"] for result in reply["results"]] == BEST_FIRST[:2]
    sent = fakes.bedrock.last_request
    assert sent.path == f"/model/{COHERE_ON_BEDROCK}/invoke"
    assert sent.body == {"query": QUERY, "documents": DOCUMENTS, "top_n": 2, "api_version": 2}
    (record,) = await records(gateway)
    assert (record.channel, record.search_units, record.cost_nanos) == ("aws", 1, PER_SEARCH_UNIT)

    body = {"model": "rerank-bedrock-busy", "query": QUERY, "documents": DOCUMENTS}
    status, reply = await rerank(gateway, key, body)
    assert status == 400, reply
    assert reply["error"]["code"] == "ValidationException"
    assert AWS.secret_access_key not in str(reply)


async def test_v2_replies_carry_the_rate_limit_headers_and_request_id(
    gateway: Gateway, fakes: Fakes
) -> None:
    key = await gateway.key(await gateway.group("team", rpm=10))
    body = {"model": "rerank-english", "query": QUERY, "documents": DOCUMENTS}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{gateway.base_url}/v2/rerank", json=body,
                     headers={"Authorization": f"Bearer {key}"}) as reply,
    ):  # fmt: skip
        assert reply.status == 200
        assert reply.headers["x-ratelimit-limit-requests"] == "10"
        assert reply.headers["x-ratelimit-remaining-requests"] == "9"
        assert reply.headers["x-request-id"] == (await reply.json())["id"]


async def test_the_request_log_shows_a_reranks_search_units(
    start_gateway: StartGateway, fakes: Fakes
) -> None:
    def with_admin(config: Config) -> None:
        with_rerankers(fakes)(config)
        config["admin"] = {"token": ADMIN}

    gateway = await start_gateway(with_admin)
    key = await gateway.key(await gateway.group("team"))
    body = {"model": "rerank-english", "query": QUERY, "documents": DOCUMENTS * 30}
    status, reply = await rerank(gateway, key, body, path="/v2/rerank")
    assert status == 200, reply
    await gateway.flush_usage()
    status, line = await call(gateway, "GET", f"/admin/requests/{reply['id']}", ADMIN)
    assert status == 200, line
    assert (line["endpoint"], line["search_units"], line["cost_usd"]) == ("/v2/rerank", 2, 0.004)
    async with browser_session() as session:
        await login(session, gateway.base_url, ADMIN)
        async with session.get(f"{gateway.base_url}/admin/ui/requests/{reply['id']}") as page:
            html = await page.text()
    assert page.status == 200
    assert "<dt>Search units</dt><dd>2</dd>" in html
