"""POST /v1/moderations: through the runner to OpenAI-compatible channels (a fake written
from OpenAI's reference), metered by input tokens, with the same access, limits,
failover and request log as every call; the official ``openai`` SDK as the client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from parley.domain.tokens import TOKENS_PER_IMAGE
from tests.api.harness import CHANNEL_KEY, Config, Gateway, StartGateway, call, records
from tests.upstreams.moderations import CATEGORIES, FakeModerations

PER_TOKEN = 1_000  # $0.001 per 1K tokens
IMAGE = "data:image/png;base64,iVBORw0KGgo="


class Fakes:
    def __init__(self) -> None:
        self.primary = FakeModerations(api_key=CHANNEL_KEY)
        self.down = FakeModerations(api_key=CHANNEL_KEY, fail=503)

    def all(self) -> tuple[FakeModerations, ...]:
        return (self.primary, self.down)


@pytest.fixture
async def fakes() -> AsyncIterator[Fakes]:
    found = Fakes()
    for fake in found.all():
        await fake.start()
    yield found
    for fake in found.all():
        await fake.stop()


def with_moderation(fakes: Fakes) -> Any:
    def tweak(config: Config) -> None:
        def channel(name: str, url: str, models: list[Any], priority: int = 0) -> Any:
            return {"name": name, "base_url": url, "api_key": CHANNEL_KEY, "models": models,
                    "priority": priority, "timeouts": {"connect": 2, "read": 5}}  # fmt: skip

        config["channels"] += [
            channel("moderator", fakes.primary.base_url,
                    [{"name": "guard", "upstream": "omni-moderation-2024-09-26"}, "guard-ha"]),
            channel("moderator-down", fakes.down.base_url, ["guard-ha"], priority=5),
        ]  # fmt: skip
        config["models"] += [
            {"name": "guard", "kind": "moderation", "aliases": ["omni-moderation-latest"],
             "prices": {"input_per_1k": "0.001"}},
            {"name": "guard-ha", "kind": "moderation"},
        ]  # fmt: skip
        config["capabilities"]["MODERATION"] = "guard"

    return tweak


@pytest.fixture
async def gateway(start_gateway: StartGateway, fakes: Fakes) -> Gateway:
    return await start_gateway(with_moderation(fakes))


async def moderate(gateway: Gateway, key: str, body: dict[str, Any]) -> tuple[int, Any]:
    return await call(gateway, "POST", "/v1/moderations", key, json=body)


async def test_the_sdk_moderates_text_metered_on_estimated_tokens(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    raw = await gateway.client(key).moderations.with_raw_response.create(
        model="guard", input="I will attack the castle at dawn"
    )
    reply = raw.parse()
    (result,) = reply.results
    assert result.flagged and result.categories.violence and not result.categories.hate
    assert result.category_scores.violence == 0.91
    assert reply.model == "guard"
    usage = raw.http_response.json()["usage"]
    assert usage == {"prompt_tokens": 8, "total_tokens": 8}  # 32 characters, 4 a token

    sent = fakes.primary.last_request
    assert (sent.path, sent.authorization) == ("/v1/moderations", f"Bearer {CHANNEL_KEY}")
    assert sent.body == {"model": "omni-moderation-2024-09-26",
                         "input": "I will attack the castle at dawn"}  # fmt: skip

    (record,) = await records(gateway)
    assert (record.endpoint, record.model, record.channel, record.status) == (
        "/v1/moderations", "guard", "moderator", 200)  # fmt: skip
    assert (record.prompt_tokens, record.estimated) == (8, True)
    assert record.cost_nanos == 8 * PER_TOKEN
    assert raw.headers["x-request-id"] == record.request_id


async def test_without_a_model_openais_default_is_asked_for(gateway: Gateway, key: str) -> None:
    reply = await gateway.client(key).moderations.create(input=["hello", "attack now"])
    assert reply.model == "guard"  # omni-moderation-latest is its alias here
    assert [result.flagged for result in reply.results] == [False, True]


async def test_text_and_image_parts(gateway: Gateway, key: str, fakes: Fakes) -> None:
    parts: Any = [
        {"type": "text", "text": "a quiet lake"},
        {"type": "image_url", "image_url": {"url": IMAGE}},
    ]
    reply = await gateway.client(key).moderations.create(model="omni-moderation-latest",
                                                         input=parts)  # fmt: skip
    (result,) = reply.results
    applied = result.category_applied_input_types
    assert applied.violence == ["text", "image"] and applied.hate == ["text"]
    assert set(result.model_dump(by_alias=True)["categories"]) == set(CATEGORIES)
    assert fakes.primary.last_request.body["input"] == parts
    (record,) = await records(gateway)
    assert record.prompt_tokens == 3 + TOKENS_PER_IMAGE  # "a quiet lake": 12 characters


async def test_an_upstream_count_is_billed_when_it_reports_one(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    fakes.primary.usage = True
    status, reply = await moderate(gateway, key, {"model": "guard", "input": "hello"})
    assert status == 200, reply
    assert reply["usage"] == {"prompt_tokens": 7, "total_tokens": 7}
    (record,) = await records(gateway)
    assert (record.prompt_tokens, record.estimated, record.cost_nanos) == (7, False, 7_000)


@pytest.mark.parametrize(
    ("value", "param"),
    [
        (None, "input"),
        ([], "input"),
        (5, "input"),
        (["a", {"type": "text", "text": "b"}], "input[0]"),
        ([{"type": "audio"}], "input[0].type"),
        ([{"type": "text", "text": 3}], "input[0].text"),
        ([{"type": "image_url", "image_url": "http://x/a.png"}], "input[0].image_url"),
    ],
)
async def test_a_bad_input_is_a_400_naming_it(
    gateway: Gateway, key: str, fakes: Fakes, value: Any, param: str
) -> None:
    body: dict[str, Any] = {"model": "guard"}
    if value is not None:
        body["input"] = value
    status, reply = await moderate(gateway, key, body)
    assert status == 400, reply
    assert reply["error"]["param"] == param
    assert fakes.primary.requests == []


async def test_a_bad_model_field_and_access(gateway: Gateway, key: str) -> None:
    status, reply = await moderate(gateway, key, {"model": 5, "input": "a"})
    assert (status, reply["error"]["param"]) == (400, "model")
    status, reply = await moderate(gateway, key, {"model": "chat-large", "input": "a"})
    assert (status, reply["error"]["code"]) == (400, "model_not_supported")
    other = await gateway.key(await gateway.group("chat-only", models=["chat-large"]))
    with pytest.raises(openai.NotFoundError) as hidden:
        await gateway.client(other).moderations.create(model="guard", input="a")
    assert hidden.value.code == "model_not_found"


async def test_rates_and_budget_apply(gateway: Gateway, fakes: Fakes) -> None:
    key = await gateway.key(await gateway.group("slow", rpm=1))
    assert (await moderate(gateway, key, {"model": "guard", "input": "a"}))[0] == 200
    status, reply = await moderate(gateway, key, {"model": "guard", "input": "a"})
    assert (status, reply["error"]["code"]) == (429, "rate_limit_exceeded")
    poor = await gateway.key(await gateway.group("poor", budget_nanos=1))
    assert (await moderate(gateway, poor, {"model": "guard", "input": "a"}))[0] == 200
    status, reply = await moderate(gateway, poor, {"model": "guard", "input": "a"})
    assert (status, reply["error"]["code"]) == (429, "insufficient_quota")


async def test_a_failed_channel_falls_over_and_a_bad_reply_is_a_502(
    gateway: Gateway, key: str, fakes: Fakes
) -> None:
    status, reply = await moderate(gateway, key, {"model": "guard-ha", "input": "attack"})
    assert status == 200, reply
    assert reply["results"][0]["flagged"]
    assert len(fakes.down.requests) == 1
    fakes.primary.garbled = True
    status, reply = await moderate(gateway, key, {"model": "guard", "input": "a"})
    assert status == 502, reply
    first, second = sorted(await records(gateway), key=lambda record: record.model)
    assert (first.model, first.channel, first.status) == ("guard", "moderator", 502)
    assert first.cost_nanos == 0
    assert (second.model, second.channel, second.status) == ("guard-ha", "moderator", 200)


async def test_models_and_capabilities_list_the_moderation_kind(gateway: Gateway, key: str) -> None:
    status, model = await call(gateway, "GET", "/v1/models/guard", key)
    assert (status, model["kind"], model["endpoints"]) == (200, "moderation", ["/v1/moderations"])
    status, capabilities = await call(gateway, "GET", "/v1/capabilities", key)
    (entry,) = [item for item in capabilities["data"] if item["key"] == "MODERATION"]
    assert (entry["model"], entry["kind"]) == ("guard", "moderation")
