"""Rates, headers, budgets and the billing endpoints, through real HTTP."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from typing import Any

import aiohttp
import openai
import pytest

from parley.domain.usage import UsageRecord
from parley.limits.memory import MemoryLimiter
from parley.pipeline.admit import scopes_for
from parley.pipeline.authenticate import authenticate
from tests.api.harness import Gateway, StartGateway
from tests.records import usage_record

MESSAGES: Any = [{"role": "user", "content": "hello there friend"}]
SIX = {
    f"x-ratelimit-{part}-{dimension}"
    for part in ("limit", "remaining", "reset")
    for dimension in ("requests", "tokens")
}


async def get(gateway: Gateway, key: str, path: str) -> tuple[int, Any, Any]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.get(f"{gateway.v1}{path}") as response,
    ):
        return response.status, response.headers, await response.json()


async def test_every_reply_carries_the_six_rate_limit_headers(
    start_gateway: StartGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The buckets' clock stands still, so no refill between the calls: the counts below
    # hold however slowly a busy machine runs them.
    frozen = MemoryLimiter(clock=lambda: 1000.0)
    monkeypatch.setattr("parley.pipeline.services.build_limiter", lambda *_args, **_kw: frozen)
    gateway = await start_gateway()
    assert gateway.services.limiter is frozen
    key = await gateway.key(await gateway.group("team", rpm=100, tpm=100_000))
    raw = await gateway.client(key).chat.completions.with_raw_response.create(
        model="chat-large", messages=MESSAGES, max_tokens=10
    )
    assert set(raw.headers) >= SIX
    assert raw.headers["x-ratelimit-limit-requests"] == "100"
    assert raw.headers["x-ratelimit-remaining-requests"] == "99"
    assert raw.headers["x-ratelimit-reset-requests"].endswith(("ms", "s"))
    async with gateway.client(key).chat.completions.with_streaming_response.create(
        model="chat-large", messages=MESSAGES, max_tokens=10, stream=True
    ) as streamed:
        assert set(streamed.headers) >= SIX
        assert streamed.headers["x-ratelimit-remaining-requests"] == "98"
    for path in ("/models", "/dashboard/billing/quota", "/models/nope", "/capabilities"):
        _, headers, _ = await get(gateway, key, path)
        assert set(headers) >= SIX, path


async def exhaust_requests(gateway: Gateway, key: str, count: int) -> None:
    caller = await authenticate(f"Bearer {key}", gateway.services.directory)
    for _ in range(count):
        assert (await gateway.services.limiter.acquire(scopes_for(caller), 0)).allowed


async def test_over_the_rate_is_429_with_retry_headers(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team", rpm=2))
    await exhaust_requests(gateway, key, 2)
    with pytest.raises(openai.RateLimitError) as refused:
        await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    error = refused.value
    assert error.code == "rate_limit_exceeded"
    assert error.body["type"] == "requests"  # type: ignore[index]
    headers = error.response.headers
    assert int(headers["retry-after"]) >= 1
    assert 0 < int(headers["retry-after-ms"]) <= 30_000
    assert headers["x-ratelimit-remaining-requests"] == "0"


async def test_the_sdk_waits_as_told_and_retries(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team", rpm=60))  # one request back a second
    await exhaust_requests(gateway, key, 60)
    raw = await gateway.client(key, max_retries=3).chat.completions.with_raw_response.create(
        model="chat-large", messages=MESSAGES
    )
    assert raw.retries_taken >= 1
    assert raw.parse().choices[0].message.content == "echo: hello there friend"


async def test_max_tokens_beyond_the_tpm_is_refused_as_too_large_without_retry(
    gateway: Gateway,
) -> None:
    key = await gateway.key(await gateway.group("team", tpm=100))
    with pytest.raises(openai.RateLimitError) as refused:
        await gateway.client(key, max_retries=2).chat.completions.with_raw_response.create(
            model="chat-large", messages=MESSAGES, max_tokens=500
        )
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert "too large" in refused.value.message
    # every 429 carries X-RateLimit-Reset-* (the spec), this one too: its bucket's reset
    assert refused.value.response.headers["x-ratelimit-reset-tokens"].endswith("s")


async def test_no_max_tokens_still_fits_a_small_tpm_and_settles_real_usage(
    gateway: Gateway,
) -> None:
    key = await gateway.key(await gateway.group("team", tpm=1000))
    client = gateway.client(key)
    for _ in range(3):
        await client.chat.completions.create(model="chat-large", messages=MESSAGES)
    await gateway.flush_usage()
    _, _, quota = await get(gateway, key, "/dashboard/billing/quota")
    # Each call reserved its prompt plus 100 (a tenth of the tpm); settled, only the 7
    # real tokens a call stay taken (refill can only lower this further).
    assert 1000 - quota["tokens"]["remaining"] <= 3 * 7


async def test_per_key_override_limits_that_key_only(gateway: Gateway) -> None:
    group = await gateway.group("team", rpm=100)
    narrow = await gateway.key(group, rpm=1)
    wide = await gateway.key(group)
    await gateway.client(narrow).chat.completions.create(model="chat-large", messages=MESSAGES)
    with pytest.raises(openai.RateLimitError):
        await gateway.client(narrow).chat.completions.create(model="chat-large", messages=MESSAGES)
    await gateway.client(wide).chat.completions.create(model="chat-large", messages=MESSAGES)


async def test_budget_spent_is_429_insufficient_quota(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team", budget_nanos=100))
    client = gateway.client(key, max_retries=2)
    await client.chat.completions.create(model="chat-large", messages=MESSAGES)  # 150 nanos
    with pytest.raises(openai.RateLimitError) as refused:
        await client.chat.completions.with_raw_response.create(
            model="chat-large", messages=MESSAGES
        )
    assert refused.value.code == "insufficient_quota"
    headers = refused.value.response.headers
    assert headers["x-should-retry"] == "false"
    # every 429 carries X-RateLimit-Reset-* (the spec): a budget's is its period's end
    hours = int(headers["x-ratelimit-reset-budget"].split("h")[0])
    assert 0 <= hours <= 31 * 24 and "retry-after" not in headers


async def test_quota_reports_limits_left_and_budget(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team", rpm=10, tpm=10_000, budget_nanos=10**9))
    await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    status, _, quota = await get(gateway, key, "/dashboard/billing/quota")
    assert status == 200
    assert quota["group"] == "team" and (quota["rpm"], quota["tpm"]) == (10, 10_000)
    assert quota["requests"]["limit"] == 10 and quota["requests"]["remaining"] == 9
    assert quota["requests"]["reset"].endswith("s")
    budget = quota["budget"]
    assert budget["limit_usd"] == 1.0
    assert budget["spent_usd"] == pytest.approx(150e-9)
    assert budget["remaining_usd"] == pytest.approx(1.0 - 150e-9)
    assert budget["period"] == "month"


def record(group_id: int, day: date, model: str, cost: int, n: int) -> UsageRecord:
    return usage_record(
        f"r-{group_id}-{day}-{model}-{n}",
        created_at=datetime(day.year, day.month, day.day, 12, tzinfo=UTC),
        group_id=group_id,
        model=model,
        cost=cost,
    )


async def test_usage_honours_the_dates_and_shows_only_the_callers_group(
    gateway: Gateway,
) -> None:
    mine, other = await gateway.group("mine"), await gateway.group("other")
    key = await gateway.key(mine)
    d1, d2, d3 = date(2026, 3, 1), date(2026, 3, 2), date(2026, 3, 5)
    await gateway.services.store.record_usage(
        [
            record(mine.id, d1, "chat-large", 20_000_000, 1),  # 2 cents
            record(mine.id, d1, "chat-large", 10_000_000, 2),  # 1 cent
            record(mine.id, d2, "vision-small", 5_000_000, 1),  # 0.5 cents
            record(mine.id, d3, "chat-large", 99_000_000_000, 1),  # outside the range
            record(other.id, d1, "chat-large", 77_000_000_000, 1),  # another group
        ]
    )
    status, _, usage = await get(
        gateway, key, "/dashboard/billing/usage?start_date=2026-03-01&end_date=2026-03-03"
    )
    assert status == 200
    assert usage["object"] == "list"
    assert usage["total_usage"] == pytest.approx(3.5)
    days = usage["daily_costs"]
    assert [d["timestamp"] for d in days] == [1772323200, 1772409600]
    assert days[0]["line_items"][0]["name"] == "chat-large"
    assert days[0]["line_items"][0]["cost"] == pytest.approx(3.0)
    assert days[0]["line_items"][0]["requests"] == 2
    assert days[1]["line_items"][0]["name"] == "vision-small"
    assert usage["totals"]["requests"] == 3
    assert usage["totals"]["total_tokens"] == 45


@pytest.mark.parametrize(
    ("query", "param"),
    [
        ("start_date=2026-13-01&end_date=2026-12-02", "start_date"),
        ("start_date=yesterday", "start_date"),
        ("start_date=2026-03-01&end_date=20260302", "end_date"),
        ("start_date=2026-03-02&end_date=2026-03-01", "end_date"),
        ("start_date=2020-01-01&end_date=2026-01-01", "end_date"),
    ],
)
async def test_bad_dates_are_400_naming_the_parameter(
    gateway: Gateway, key: str, query: str, param: str
) -> None:
    status, _, payload = await get(gateway, key, f"/dashboard/billing/usage?{query}")
    assert status == 400
    assert payload["error"]["param"] == param


async def test_subscription_in_one_api_shape(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team", budget_nanos=5 * 10**9))
    status, _, sub = await get(gateway, key, "/dashboard/billing/subscription")
    assert status == 200
    assert sub["object"] == "billing_subscription" and sub["has_payment_method"] is True
    assert sub["hard_limit_usd"] == sub["soft_limit_usd"] == 5.0
    assert sub["access_until"] > datetime.now(UTC).timestamp()
    assert sub["access_until"] <= (datetime.now(UTC) + timedelta(days=32)).timestamp()


async def test_raw_records_past_retention_are_pruned_in_the_background_rollups_kept(
    start_gateway: Any,
) -> None:
    def fast_pruning(config: dict[str, Any]) -> None:
        config["usage"].update(retention_days=1, prune_every_seconds=0.05)

    gateway = await start_gateway(fast_pruning)
    group = await gateway.group("team")
    key = await gateway.key(group)
    old = date.today() - timedelta(days=3)
    await gateway.services.store.record_usage([record(group.id, old, "chat-large", 10**7, 1)])
    await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    async with asyncio.timeout(5):
        while await gateway.usage_count() != 1:  # noqa: ASYNC110 (the prune loop's pace)
            await asyncio.sleep(0.05)
    rollups = await gateway.services.store.daily_usage(group.id, old, old + timedelta(days=1))
    assert [row.cost_nanos for row in rollups] == [10**7]


async def test_a_call_is_in_the_usage_read_right_after_it(start_gateway: StartGateway) -> None:
    def slow_writer(config: dict[str, Any]) -> None:
        config["usage"]["flush_seconds"] = 600  # the writer's own pace never writes it

    gateway = await start_gateway(slow_writer)
    key = await gateway.key(await gateway.group("team"))
    reply = await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    assert gateway.services.meter.writer.backlog == 1
    _, _, quota = await get(gateway, key, "/dashboard/billing/quota")
    status, _, usage = await get(gateway, key, "/dashboard/billing/usage")
    assert status == 200
    assert usage["totals"]["requests"] == 1
    assert reply.usage is not None
    assert usage["totals"]["total_tokens"] == reply.usage.total_tokens
    assert usage["totals"]["cost_usd"] == quota["budget"]["spent_usd"] > 0
    (item,) = [item for day in usage["daily_costs"] for item in day["line_items"]]
    assert (item["name"], item["requests"]) == ("chat-large", 1)
    assert gateway.services.meter.writer.backlog == 0
