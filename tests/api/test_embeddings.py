"""POST /v1/embeddings: through the runner to an OpenAI-compatible channel, metered by
input tokens, with the same authentication, limits and headers as every /v1 call."""

from __future__ import annotations

import base64
import struct
from typing import Any, get_args

import aiohttp
import openai
import pytest

from parley.api import realtime
from parley.api.chat import CHAT
from parley.api.completions import COMPLETIONS
from parley.api.embeddings import EMBEDDINGS, MAX_INPUTS
from parley.api.images import EDITS, GENERATIONS
from parley.api.moderations import MODERATIONS
from parley.api.rerank import RERANK_V1, RERANK_V2
from parley.settings import ModelKind
from tests.api.harness import Gateway, StartGateway, records
from tests.upstreams.embeddings import vector
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

AUDIO_KINDS = {"speech", "transcription"}
"""Served by the audio endpoints (``/v1/audio/speech``, ``/v1/audio/transcriptions``)."""
REALTIME_KINDS = realtime.KINDS
"""Served by ``/v1/realtime`` (a WebSocket)."""


def with_embeddings(config: dict[str, Any]) -> None:
    config["models"].append(
        {"name": "embed-small", "kind": "embedding", "prices": {"input_per_1k": "0.0001"}}
    )
    config["channels"][0]["models"].append({"name": "embed-small", "upstream": "upstream-embed"})


@pytest.fixture
async def gateway(start_gateway: StartGateway) -> Gateway:
    return await start_gateway(with_embeddings)


async def post(gateway: Gateway, key: str, body: dict[str, Any]) -> tuple[int, Any, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{gateway.v1}/embeddings", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as reply,
    ):
        return reply.status, reply.headers, await reply.json()


async def test_the_sdk_gets_embeddings_metered_by_input_tokens(
    gateway: Gateway, engine: FakeEngine
) -> None:
    key = await gateway.key(await gateway.group("team", rpm=100))
    raw = await gateway.client(key).embeddings.with_raw_response.create(
        model="embed-small", input="hello there friend"
    )
    reply = raw.parse()
    assert reply.model == "embed-small"
    assert len(reply.data) == 1
    # the SDK asks for base64 and decodes it: the fake engine's vector, unchanged
    assert reply.data[0].embedding == pytest.approx(vector("hello there friend", 8), abs=1e-6)
    assert (reply.usage.prompt_tokens, reply.usage.total_tokens) == (3, 3)
    assert engine.last_request.path == "/v1/embeddings"
    assert engine.last_request.body["model"] == "upstream-embed"
    assert engine.last_request.body["encoding_format"] == "base64"

    (record,) = await records(gateway)
    assert (record.endpoint, record.model, record.status) == ("/v1/embeddings", "embed-small", 200)
    assert (record.prompt_tokens, record.completion_tokens) == (3, 0)
    assert record.cost_nanos == 3 * 100  # $0.0001 per 1K tokens = 100 nano-dollars a token
    assert not record.estimated
    assert raw.headers["x-request-id"] == record.request_id
    assert "x-ratelimit-remaining-requests" in raw.headers


async def test_arrays_dimensions_and_encoding_are_passed_through(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    body = {
        "model": "embed-small",
        "input": ["one", "two words"],
        "dimensions": 4,
        "encoding_format": "float",
        "user": "u-1",
    }
    status, _, reply = await post(gateway, key, body)
    assert status == 200, reply
    assert [item["index"] for item in reply["data"]] == [0, 1]
    assert reply["data"][1]["embedding"] == vector("two words", 4)
    assert reply["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    sent = engine.last_request.body
    assert (sent["dimensions"], sent["encoding_format"], sent["user"]) == (4, "float", "u-1")

    tokens = {"model": "embed-small", "input": [[1, 2, 3], [4]], "encoding_format": "base64"}
    status, _, reply = await post(gateway, key, tokens)
    assert status == 200, reply
    packed = base64.b64decode(reply["data"][0]["embedding"])
    assert list(struct.unpack("<8f", packed)) == pytest.approx(vector([1, 2, 3], 8), abs=1e-6)
    assert reply["usage"]["prompt_tokens"] == 4


async def test_without_upstream_usage_the_input_is_estimated(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(usage=False)
    status, _, reply = await post(gateway, key, {"model": "embed-small", "input": "x" * 40})
    assert status == 200
    (record,) = await records(gateway)
    assert record.estimated
    assert record.prompt_tokens == 10 == reply["usage"]["prompt_tokens"]


@pytest.mark.parametrize(
    "value",
    [None, "", [], [""], ["a", 1], [[1], "a"], [[]], [-1], {"text": "a"}, ["a"] * (MAX_INPUTS + 1)],
    ids=["missing", "empty", "no-items", "empty-item", "mixed", "mixed-arrays", "empty-tokens",
         "negative", "object", "too-many"],
)  # fmt: skip
async def test_bad_input_is_a_400_naming_input(gateway: Gateway, key: str, value: Any) -> None:
    body: dict[str, Any] = {"model": "embed-small"}
    if value is not None:
        body["input"] = value
    status, _, reply = await post(gateway, key, body)
    assert status == 400
    assert reply["error"]["param"] == "input"


async def test_bad_options_are_400s(gateway: Gateway, key: str) -> None:
    for field, bad in (("encoding_format", "int8"), ("dimensions", 0), ("user", 5)):
        status, _, reply = await post(
            gateway, key, {"model": "embed-small", "input": "a", field: bad}
        )
        assert status == 400
        assert reply["error"]["param"] == field


async def test_models_of_another_kind_are_refused_both_ways(gateway: Gateway, key: str) -> None:
    client = gateway.client(key)
    with pytest.raises(openai.BadRequestError) as chat_model:
        await client.embeddings.create(model="chat-large", input="a")
    assert chat_model.value.code == "model_not_supported"
    with pytest.raises(openai.BadRequestError) as embedding_model:
        await client.chat.completions.create(
            model="embed-small", messages=[{"role": "user", "content": "a"}]
        )
    assert embedding_model.value.code == "model_not_supported"
    with pytest.raises(openai.NotFoundError):
        await client.embeddings.create(model="embed-nope", input="a")


async def test_auth_and_limits_apply(gateway: Gateway) -> None:
    status, headers, reply = await post(gateway, "pk-wrong-key-0123456789", {"input": "a"})
    assert status == 401
    assert headers["x-request-id"].startswith("req_")
    key = await gateway.key(await gateway.group("limited", rpm=1))
    assert (await post(gateway, key, {"model": "embed-small", "input": "a"}))[0] == 200
    status, headers, reply = await post(gateway, key, {"model": "embed-small", "input": "a"})
    assert status == 429
    assert reply["error"]["code"] == "rate_limit_exceeded"
    assert "retry-after" in headers


def test_every_model_kind_the_config_accepts_has_an_endpoint() -> None:
    served = set(CHAT.kinds) | set(COMPLETIONS.kinds) | set(EMBEDDINGS.kinds)
    served |= set(MODERATIONS.kinds) | set(RERANK_V1.kinds) | set(RERANK_V2.kinds)
    served |= set(GENERATIONS.kinds) | set(EDITS.kinds)
    assert set(get_args(ModelKind)) == served | AUDIO_KINDS | REALTIME_KINDS


@pytest.mark.parametrize("given", ["float", "base64"])
async def test_the_sdk_gets_its_encoding_from_an_upstream_that_ignores_it(
    gateway: Gateway, key: str, engine: FakeEngine, given: str
) -> None:
    engine.behaviour = Behaviour(embedding_encoding=given)
    client = gateway.client(key)
    # the SDK asks for base64 when the caller names no format, and decodes it itself
    raw = await client.embeddings.with_raw_response.create(model="embed-small", input="hi you")
    assert engine.last_request.body["encoding_format"] == "base64"
    assert isinstance(raw.http_response.json()["data"][0]["embedding"], str)
    assert raw.parse().data[0].embedding == pytest.approx(vector("hi you", 8), abs=1e-6)
    # asked for numbers, it gets numbers
    floats = await client.embeddings.create(
        model="embed-small", input="hi you", encoding_format="float"
    )
    assert floats.data[0].embedding == pytest.approx(vector("hi you", 8), abs=1e-6)


@pytest.mark.parametrize("given", ["float", "base64"])
@pytest.mark.parametrize("asked", [None, "float", "base64"])
async def test_raw_http_gets_the_encoding_it_asked_for_whatever_the_upstream_sent(
    gateway: Gateway, key: str, engine: FakeEngine, given: str, asked: str | None
) -> None:
    engine.behaviour = Behaviour(embedding_encoding=given)
    body: dict[str, Any] = {"model": "embed-small", "input": ["one", "two words"]}
    if asked is not None:
        body["encoding_format"] = asked
    status, _, reply = await post(gateway, key, body)
    assert status == 200, reply
    for item, text in zip(reply["data"], ["one", "two words"], strict=True):
        if asked == "base64":  # little-endian float32, as OpenAI sends it
            packed = base64.b64decode(item["embedding"])
            numbers = list(struct.unpack("<8f", packed))
        else:  # OpenAI's default is an array of numbers
            numbers = item["embedding"]
            assert isinstance(numbers, list)
        assert numbers == pytest.approx(vector(text, 8), abs=1e-6)


async def test_an_embedding_that_cannot_be_read_is_a_502_that_costs_nothing(
    gateway: Gateway, key: str, engine: FakeEngine
) -> None:
    engine.behaviour = Behaviour(embedding_encoding="broken")
    status, _, reply = await post(gateway, key, {"model": "embed-small", "input": "a"})
    assert status == 502
    assert reply["error"]["code"] == "bad_gateway"
    assert "could not be read" in reply["error"]["message"]
    (record,) = await records(gateway)
    assert (record.status, record.cost_nanos) == (502, 0)
