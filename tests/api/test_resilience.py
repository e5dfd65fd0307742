"""Sick channels through a real gateway: breakers, first-token and idle timeouts, fallbacks
and the retry budget, against fake engines that refuse, hang, stall, fail and recover."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from parley.runtime.circuit import State
from tests.api.admin_client import ADMIN, browser_session, login
from tests.api.admin_client import call as admin_call
from tests.api.harness import CHANNEL_KEY, Config, Gateway, StartGateway, records, starting
from tests.api.test_operator_telemetry import scrape
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

MESSAGES: Any = [{"role": "user", "content": "hello there friend"}]
DEAD_URL = "http://127.0.0.1:9/v1"
"""Nothing listens on port 9 (discard): every connection is refused."""


def channel(name: str, url: str, priority: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "base_url": url,
        "api_key": CHANNEL_KEY,
        "priority": priority,
        "models": [{"name": "chat-large", "upstream": "upstream-chat"}],
        "timeouts": {"connect": 1, "read": 5, "first_token": 0.5, "idle": 0.5},
        **extra,
    }


def two_channels(sick_url: str, healthy_url: str, workdir: Path, **sick: Any) -> Config:
    """``chat-large`` on a sick channel tried first and a healthy one after it."""
    return {
        "database": {"url": f"sqlite:///{workdir / 'parley.db'}"},
        "usage": {"flush_seconds": 0.05, "spill_dir": str(workdir)},
        "limits": {"cache_refresh_seconds": 0.2},
        "channels": [
            channel("sick", sick_url, 1, **sick),
            channel("healthy", healthy_url, 0),
        ],
        "models": [
            {
                "name": "chat-large",
                "kind": "chat",
                "prices": {"input_per_1k": "0.00001", "output_per_1k": "0.00003"},
            },
            {
                "name": "chat-backup",
                "kind": "chat",
                "prices": {"input_per_1k": "0.001", "output_per_1k": "0.002"},
            },
            {"name": "chat-long", "kind": "chat", "context_window": 200000},
        ],
    }


@pytest.fixture
async def sick() -> AsyncIterator[FakeEngine]:
    async with FakeEngine(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def start(
    engine: FakeEngine, sick: FakeEngine, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    async with starting(lambda: two_channels(sick.base_url, engine.base_url, tmp_path)) as go:
        yield go


def failures_on(gateway: Gateway, channel_name: str) -> list[str]:
    """Collects the name of every failed attempt on ``channel_name`` from now on."""
    seen: list[str] = []

    def watch(call: Any, route: Any, error: Any, seconds: float) -> None:
        if route.target.channel == channel_name:
            seen.append(type(error).__name__)

    gateway.services.watchers.upstream_failed.append(watch)
    return seen


def state(gateway: Gateway, key: str) -> State:
    channel_name = key.partition(":")[0]
    (found,) = [v for v in gateway.services.breakers.views(channel_name) if v.key == key]
    return found.state


async def chat(gateway: Gateway, key: str, model: str = "chat-large") -> Any:
    return await gateway.client(key).chat.completions.with_raw_response.create(
        model=model, messages=MESSAGES
    )


async def test_a_dead_channel_costs_nothing_once_its_breaker_opens(
    engine: FakeEngine, tmp_path: Path
) -> None:
    # A cool-down longer than the test: no half-open probe, however slow the machine.
    config = lambda: two_channels(  # noqa: E731
        DEAD_URL, engine.base_url, tmp_path, breaker={"cooldown_seconds": 300}
    )
    async with starting(config) as go:
        gateway = await go()
        key = await gateway.key(await gateway.group("team"))
        tried = failures_on(gateway, "sick")
        for _ in range(20):
            raw = await chat(gateway, key)
            assert raw.http_response.status_code == 200
        assert tried == ["UpstreamUnreachable"] * 5  # the default: five in a row open it
        assert state(gateway, "sick") == State.OPEN
        assert {r.channel for r in await records(gateway)} == {"healthy"}


async def test_a_hanging_channel_is_failed_over_at_first_token_then_skipped(
    start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(hang=5)
    gateway = await start()
    key = await gateway.key(await gateway.group("team"))
    tried = failures_on(gateway, "sick")
    client = gateway.client(key)
    began = time.monotonic()
    stream = await client.chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "echo: hello there friend"
    assert 0.4 < time.monotonic() - began < 2.0  # the first-token timeout, not the hang
    assert tried == ["FirstTokenTimeout"]
    for _ in range(4):
        stream = await client.chat.completions.create(
            model="chat-large", messages=MESSAGES, stream=True
        )
        _ = [c async for c in stream]
    assert state(gateway, "sick:upstream-chat") == State.OPEN
    began = time.monotonic()
    stream = await client.chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    _ = [c async for c in stream]
    assert time.monotonic() - began < 0.3  # skipped: the caller pays nothing for it
    assert len(tried) == 5
    assert {r.channel for r in await records(gateway)} == {"healthy"}


async def test_the_half_open_probe_closes_the_breaker_when_the_upstream_recovers(
    start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(fail=503)
    gateway = await start(lambda c: c["channels"][0].update(breaker={"cooldown_seconds": 0.3}))
    key = await gateway.key(await gateway.group("team"))
    tried = failures_on(gateway, "sick")
    for _ in range(6):
        await chat(gateway, key)
    assert state(gateway, "sick:upstream-chat") == State.OPEN
    assert len(tried) == 5
    await asyncio.sleep(0.35)
    await chat(gateway, key)  # the probe: still failing, so it opens again
    assert len(tried) == 6
    assert state(gateway, "sick:upstream-chat") == State.OPEN
    sick.behaviour = Behaviour()
    await chat(gateway, key)
    assert len(tried) == 6  # still cooling down: not tried
    await asyncio.sleep(0.35)
    await chat(gateway, key)  # the probe succeeds
    assert state(gateway, "sick:upstream-chat") == State.CLOSED
    assert (await records(gateway))[-1].channel == "sick"


async def test_a_429_retry_after_is_the_cool_down(start: StartGateway, sick: FakeEngine) -> None:
    sick.behaviour = Behaviour(fail=429, retry_after=42)
    gateway = await start(lambda c: c["channels"][0].update(breaker={"failures": 1}))
    key = await gateway.key(await gateway.group("team"))
    await chat(gateway, key)
    view = next(v for v in gateway.services.breakers.views("sick") if v.model)
    assert view.state == State.OPEN
    assert view.next_probe_at is not None
    assert 40 < view.next_probe_at - time.time() <= 42


async def test_an_upstream_without_the_model_is_a_misconfiguration_never_retried(
    start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(fail=404)
    gateway = await start(lambda c: c["channels"].pop())  # the sick channel alone
    key = await gateway.key(await gateway.group("team"))
    client = gateway.client(key, max_retries=2)
    for stream in (False, True):
        with pytest.raises(openai.APIStatusError) as refused:
            await client.chat.completions.create(
                model="chat-large", messages=MESSAGES, stream=stream
            )
        assert refused.value.status_code == 502
        assert refused.value.response.headers["x-should-retry"] == "false"
        error: Any = refused.value.body
        assert error["code"] == "upstream_model_not_found" and error["type"] == "upstream_error"
        assert "`chat-large` is misconfigured on this gateway" in error["message"]
        assert CHANNEL_KEY not in error["message"]
    assert len(sick.requests) == 2  # one each: the SDK did not retry
    claude = anthropic.AsyncAnthropic(base_url=gateway.base_url, api_key=key, max_retries=2)
    try:
        with pytest.raises(anthropic.APIStatusError) as told:
            await claude.messages.create(model="chat-large", max_tokens=10, messages=MESSAGES)
    finally:
        await claude.close()
    assert told.value.status_code == 502
    assert told.value.response.headers["x-should-retry"] == "false"
    body: Any = told.value.body
    assert body["type"] == "error" and "misconfigured" in body["error"]["message"]
    assert len(sick.requests) == 3


async def test_the_callers_own_4xx_never_opens_a_breaker(
    start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(overflow=True)
    gateway = await start()
    key = await gateway.key(await gateway.group("team"))
    for _ in range(8):
        with pytest.raises(openai.BadRequestError):
            await chat(gateway, key)
    assert state(gateway, "sick:upstream-chat") == State.CLOSED
    assert state(gateway, "sick") == State.CLOSED


async def test_a_stream_stalled_midway_ends_with_an_error_and_bills_what_came(
    start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(stall_after=2)
    gateway = await start()
    key = await gateway.key(await gateway.group("team"))
    stream = await gateway.client(key).chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    got: list[Any] = []
    began = time.monotonic()
    with pytest.raises(openai.APIError):
        async for chunk in stream:
            got.append(chunk)
    assert time.monotonic() - began < 2.0
    assert len(got) == 2
    (record,) = await records(gateway)
    assert (record.channel, record.status) == ("sick", 504)
    assert record.completion_tokens > 0 and record.cost_nanos > 0


def with_fallbacks(config: Config) -> None:
    """``chat-large`` served by the sick channel only, with ``chat-backup`` behind it."""
    sick, healthy = config["channels"]
    healthy["models"] = [{"name": "chat-backup"}, {"name": "chat-long"}]
    sick["models"] = [{"name": "chat-large", "upstream": "upstream-chat"}]
    config["models"][0]["fallbacks"] = ["chat-backup"]
    config["models"][0]["fallbacks_on_context"] = ["chat-long"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_fallback_answers_with_its_own_name_and_price(
    start: StartGateway, sick: FakeEngine, stream: bool
) -> None:
    sick.behaviour = Behaviour(fail=503)
    gateway = await start(with_fallbacks)
    key = await gateway.key(await gateway.group("team"))
    client = gateway.client(key)
    if stream:
        async with client.chat.completions.with_streaming_response.create(
            model="chat-large", messages=MESSAGES, stream=True
        ) as response:
            header = response.headers["x-parley-model"]
            chunks = [c async for c in await response.parse()]
        names = {c.model for c in chunks}
    else:
        raw = await chat(gateway, key)
        header = raw.headers["x-parley-model"]
        names = {raw.parse().model}
    assert header == "chat-backup" and names == {"chat-backup"}
    (record,) = await records(gateway)
    assert (record.model, record.channel, record.status) == ("chat-backup", "healthy", 200)
    # chat-backup's prices: 1,000 and 2,000 nano-dollars a token
    assert record.cost_nanos == record.prompt_tokens * 1000 + record.completion_tokens * 2000
    assert len(sick.requests) == 1  # sent once to the sick channel, never again


async def test_a_fallback_the_group_may_not_use_is_skipped(
    start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(fail=503)
    gateway = await start(with_fallbacks)
    key = await gateway.key(await gateway.group("team", models=["chat-large"]))
    with pytest.raises(openai.APIStatusError) as refused:
        await chat(gateway, key)
    assert refused.value.status_code == 502
    (record,) = await records(gateway)
    assert (record.model, record.cost_nanos) == ("chat-large", 0)


async def test_a_prompt_too_long_goes_to_the_context_fallback(
    start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(overflow=True)
    gateway = await start(with_fallbacks)
    key = await gateway.key(await gateway.group("team"))
    raw = await chat(gateway, key)
    assert raw.headers["x-parley-model"] == "chat-long"
    assert raw.parse().model == "chat-long"
    (record,) = await records(gateway)
    assert (record.model, record.channel) == ("chat-long", "healthy")


async def test_the_retry_budget_holds_under_a_total_outage(
    start: StartGateway, sick: FakeEngine, engine: FakeEngine
) -> None:
    def outage(config: Config) -> None:
        config["routing"] = {"retry_ratio": 0.1, "min_retries": 2}
        for item in config["channels"]:
            item["breaker"] = {"enabled": False}
        config["channels"].append(channel("third", engine.base_url, -1))

    sick.behaviour = engine.behaviour = Behaviour(fail=503)
    gateway = await start(outage)
    key = await gateway.key(await gateway.group("team"))
    for _ in range(30):
        with pytest.raises(openai.APIStatusError):
            await chat(gateway, key)
    attempts = len(sick.requests) + len(engine.requests)
    assert 30 <= attempts <= 30 + 2 + 3  # at most min_retries plus a tenth of the calls
    assert gateway.services.planner.budget.refused > 0


async def test_max_attempts_bounds_one_call(start: StartGateway, sick: FakeEngine) -> None:
    sick.behaviour = Behaviour(fail=503)
    gateway = await start(lambda c: c.update(routing={"max_attempts": 1}))
    key = await gateway.key(await gateway.group("team"))
    with pytest.raises(openai.APIStatusError):
        await chat(gateway, key)
    assert len(sick.requests) == 1


async def test_breakers_are_visible_in_the_admin_api_dashboard_and_metrics(
    start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(fail=502)
    gateway = await start(lambda c: c.update(admin={"token": ADMIN}, routing={"max_attempts": 4}))
    key = await gateway.key(await gateway.group("team"))
    for _ in range(5):
        await chat(gateway, key)
    status, listed = await admin_call(gateway, "GET", "/admin/channels")
    assert status == 200
    circuit = next(c for c in listed["data"] if c["name"] == "sick")["circuit"]
    assert circuit["state"] == "closed"  # the channel answers: only its model is shut
    (model,) = circuit["models"]
    assert (model["model"], model["state"], model["failures_in_a_row"]) == (
        "upstream-chat",
        "open",
        5,
    )
    assert model["error_rate"] == 1.0 and "status 502" in model["last_error"]
    assert model["next_probe_at"] is not None
    healthy = next(c for c in listed["data"] if c["name"] == "healthy")
    assert healthy["circuit"]["models"][0]["state"] == "closed"
    assert healthy["timeouts"]["first_token"] == 0.5
    async with browser_session() as session:
        await login(session, gateway.base_url, ADMIN)
        async with session.get(f"{gateway.base_url}/admin/ui/channels") as page:
            html = await page.text()
    assert "none configured" not in html
    assert "breaker-open" in html and "failed (status 502)" in html
    series = await scrape(gateway)
    states = {
        (labels["channel"], labels["model"]): value
        for labels, value in series["parley_channel_state"]
    }
    assert states[("sick", "upstream-chat")] == 1 and states[("healthy", "")] == 0
    moved = series["parley_breaker_transitions_total"]
    assert ({"channel": "sick", "model": "upstream-chat", "state": "open"}, 1.0) in moved
    assert series["parley_failovers_total"] == [({}, 5.0)]


async def test_fallbacks_are_counted_in_the_metrics(start: StartGateway, sick: FakeEngine) -> None:
    sick.behaviour = Behaviour(fail=503)
    gateway = await start(with_fallbacks)
    key = await gateway.key(await gateway.group("team"))
    await chat(gateway, key)
    series = await scrape(gateway)
    assert series["parley_fallbacks_total"] == [
        ({"model": "chat-large", "fallback": "chat-backup"}, 1.0)
    ]


@pytest.mark.parametrize("operation", ["embeddings", "completions"])
async def test_other_operations_fall_over_and_open_the_breaker(
    start: StartGateway, sick: FakeEngine, operation: str
) -> None:
    def embeddings_too(config: Config) -> None:
        config["models"].append({"name": "embed", "kind": "embedding"})
        for item in config["channels"]:
            item["models"].append({"name": "embed", "upstream": "upstream-embed"})

    sick.behaviour = Behaviour(fail=500)
    gateway = await start(embeddings_too)
    client = gateway.client(await gateway.key(await gateway.group("team")))
    for _ in range(6):
        if operation == "embeddings":
            await client.embeddings.create(model="embed", input="hello there")
        else:
            await client.completions.create(model="chat-large", prompt="hello there")
    upstream = "upstream-embed" if operation == "embeddings" else "upstream-chat"
    assert state(gateway, f"sick:{upstream}") == State.OPEN
    assert len(sick.requests) == 5
    assert {r.channel for r in await records(gateway)} == {"healthy"}


async def test_the_total_timeout_bounds_a_whole_reply_and_a_started_stream(
    start: StartGateway, sick: FakeEngine
) -> None:
    gateway = await start(lambda c: c["channels"][0]["timeouts"].update(total=1.0, idle=5))
    client = gateway.client(await gateway.key(await gateway.group("team")))
    sick.behaviour = Behaviour(hang=3)
    began = time.monotonic()
    with pytest.raises(openai.APIStatusError) as late:
        await client.chat.completions.create(model="chat-large", messages=MESSAGES)
    assert late.value.status_code == 504 and time.monotonic() - began < 2.5
    sick.behaviour = Behaviour(delay=0.4)
    stream = await client.chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    got: list[Any] = []
    with pytest.raises(openai.APIError):
        async for chunk in stream:
            got.append(chunk)
    assert 1 <= len(got) < 5
    whole, streamed = await records(gateway)
    assert (whole.status, whole.channel, whole.cost_nanos) == (504, "sick", 0)
    assert (streamed.status, streamed.channel) == (504, "sick")
    assert streamed.completion_tokens > 0


async def test_messages_calls_fall_over_and_open_the_breaker_like_chat(
    engine: FakeEngine, tmp_path: Path
) -> None:
    """The Anthropic dialect routes through the same planner: a dead channel is skipped
    once its breaker opens, whole and streamed Messages calls alike."""
    async with starting(lambda: two_channels(DEAD_URL, engine.base_url, tmp_path)) as go:
        gateway = await go()
        key = await gateway.key(await gateway.group("team"))
        tried = failures_on(gateway, "sick")
        client = anthropic.AsyncAnthropic(base_url=gateway.base_url, api_key=key, max_retries=0)
        try:
            for _ in range(6):
                message = await client.messages.create(
                    model="chat-large", max_tokens=50, messages=MESSAGES
                )
                assert message.content[0].type == "text"
            async with client.messages.stream(
                model="chat-large", max_tokens=50, messages=MESSAGES
            ) as stream:
                text = "".join([piece async for piece in stream.text_stream])
        finally:
            await client.close()
        assert text == "echo: hello there friend"
        assert tried == ["UpstreamUnreachable"] * 5
        assert state(gateway, "sick") == State.OPEN
        found = await records(gateway)
        assert {r.channel for r in found} == {"healthy"}
        assert {r.endpoint for r in found} == {"/v1/messages"}
