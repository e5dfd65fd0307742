"""What an operator watches: ``/metrics`` (parsed with prometheus-client's own parser),
its token, ``x-request-id`` on every reply, and CORS for browser callers."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from parley.telemetry import upstream
from tests.api.harness import CHANNEL_KEY, Gateway, StartGateway, call
from tests.upstreams.openai_audio import FakeAudioEngine
from tests.upstreams.openai_compatible import Behaviour, FakeEngine

MESSAGES: Any = [{"role": "user", "content": "hello there friend"}]
CHAT = "/v1/chat/completions"
ORIGIN = "https://app.example.com"


async def scrape(gateway: Gateway, token: str | None = None) -> dict[str, Any]:
    """``/metrics`` parsed: sample name → list of (labels, value)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{gateway.base_url}/metrics", headers=headers) as reply,
    ):
        assert reply.status == 200, await reply.text()
        assert reply.headers["Content-Type"].startswith("text/plain")
        text = await reply.text()
    samples: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def value(samples: dict[str, Any], name: str, **labels: str) -> float:
    matching = [v for found, v in samples.get(name, []) if labels.items() <= found.items()]
    assert len(matching) == 1, (name, labels, samples.get(name))
    return float(matching[0])


async def test_metrics_count_calls_tokens_cost_and_the_writer(gateway: Gateway, key: str) -> None:
    client = gateway.client(key)
    await client.chat.completions.create(model="chat-large", messages=MESSAGES)
    stream = await client.chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    _ = [chunk async for chunk in stream]
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="nope", messages=MESSAGES)
    await gateway.flush_usage()

    samples = await scrape(gateway)
    ok = {"model": "chat-large", "status": "200"}
    assert value(samples, "parley_requests_total", **ok) == 2
    assert value(samples, "parley_request_duration_seconds_count", **ok) == 2
    assert value(samples, "parley_request_duration_seconds_bucket", le="+Inf", **ok) == 2
    spend = {"group": "team", "model": "chat-large"}
    assert value(samples, "parley_tokens_total", direction="prompt", **spend) == 6
    assert value(samples, "parley_tokens_total", direction="completion", **spend) == 8
    # spec prices: 10 nano-dollars a prompt token, 30 a completion token
    assert value(samples, "parley_cost_usd_total", **spend) == pytest.approx(
        (6 * 10 + 8 * 30) / 1e9
    )
    assert value(samples, "parley_limiter_decisions_total", decision="admitted") == 2
    assert value(samples, "parley_usage_write_seconds_count", outcome="ok") >= 1
    assert value(samples, "parley_usage_queue_depth") == 0
    age = value(samples, "parley_directory_refresh_age_seconds")
    assert 0 <= age < 3600
    # the unknown model was refused before admission: not a metered call
    assert not [s for s in samples["parley_requests_total"] if s[0]["model"] == "nope"]


async def test_metrics_can_require_their_own_token(start_gateway: StartGateway) -> None:
    def with_token(config: dict[str, Any]) -> None:
        config["metrics"] = {"token": "scrape-secret"}

    gateway = await start_gateway(with_token)
    async with aiohttp.ClientSession() as session:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            async with session.get(f"{gateway.base_url}/metrics", headers=headers) as reply:
                assert reply.status == 401
                body = await reply.json()
                assert body["error"]["code"] == "invalid_api_key"
                assert "scrape-secret" not in str(body)
    assert "parley_usage_queue_depth" in await scrape(gateway, "scrape-secret")


async def test_metrics_can_be_turned_off(start_gateway: StartGateway) -> None:
    def off(config: dict[str, Any]) -> None:
        config["metrics"] = {"enabled": False}

    gateway = await start_gateway(off)
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{gateway.base_url}/metrics") as reply,
    ):
        assert reply.status == 404


async def test_every_reply_carries_a_request_id(gateway: Gateway, key: str) -> None:
    async def headers_of(method: str, path: str, auth: str | None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {auth}"} if auth else {}
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                method, f"{gateway.base_url}{path}", headers=headers, allow_redirects=False
            ) as reply,
        ):
            return reply.status, reply.headers.get("x-request-id", "")

    seen = set()
    for method, path, auth, status in [
        ("GET", "/v1/models", key, 200),
        ("GET", "/v1/models", None, 401),
        ("GET", "/v1/models/nope", key, 404),
        ("GET", "/v1/nowhere", key, 404),
        ("POST", "/v1/chat/completions", key, 415),
        ("GET", "/health", None, 200),
        ("GET", "/metrics", None, 200),
    ]:
        got, request_id = await headers_of(method, path, auth)
        assert got == status, (method, path)
        assert request_id.startswith("req_"), (method, path)
        seen.add(request_id)
    # a stream's head is sent by the runner, before the middleware sees its reply
    stream = {"model": "chat-large", "messages": [{"role": "user", "content": "hi"}]}
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session,
        session.post(f"{gateway.v1}/chat/completions", json={**stream, "stream": True}) as reply,
    ):
        assert reply.status == 200
        seen.add(reply.headers.get("x-request-id", ""))
        await reply.read()
    assert all(request_id.startswith("req_") for request_id in seen)
    assert len(seen) == 8, "each reply has an id of its own"

    # the SDK reads it into request_id, on errors too
    with pytest.raises(openai.AuthenticationError) as refused:
        await gateway.client("pk-wrong-key-0123456789").models.list()
    assert (refused.value.request_id or "").startswith("req_")


async def test_cors_is_off_by_default(gateway: Gateway) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.options(
            f"{gateway.v1}/chat/completions",
            headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"},
        ) as reply,
    ):
        assert reply.status == 405  # no route takes OPTIONS: refused before any key is read
        assert "Access-Control-Allow-Origin" not in reply.headers


async def test_cors_preflight_is_answered_before_authentication(
    start_gateway: StartGateway,
) -> None:
    def browsers(config: dict[str, Any]) -> None:
        config["server"]["cors"] = {"allowed_origins": [ORIGIN]}

    gateway = await start_gateway(browsers)
    asked = "authorization, content-type, x-stainless-lang, x-stainless-retry-count"
    async with aiohttp.ClientSession() as session:
        async with session.options(
            f"{gateway.v1}/chat/completions",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": asked,
            },
        ) as reply:
            assert reply.status == 204
            assert reply.headers["Access-Control-Allow-Origin"] == ORIGIN
            assert "POST" in reply.headers["Access-Control-Allow-Methods"]
            allowed = {h.strip() for h in reply.headers["Access-Control-Allow-Headers"].split(",")}
            assert {"authorization", "content-type", "x-stainless-lang"} <= allowed
        async with session.options(
            f"{gateway.v1}/chat/completions",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        ) as refused:
            assert refused.status == 403
            assert "Access-Control-Allow-Origin" not in refused.headers


async def test_cors_replies_expose_the_request_id_and_rate_limit_headers(
    start_gateway: StartGateway,
) -> None:
    def browsers(config: dict[str, Any]) -> None:
        config["server"]["cors"] = {"allowed_origins": [ORIGIN]}

    gateway = await start_gateway(browsers)
    key = await gateway.key(await gateway.group("team", rpm=100))
    body = {"model": "chat-large", "messages": MESSAGES}
    async with aiohttp.ClientSession() as session:
        for auth, status in ((key, 200), ("pk-wrong-key-0123456789", 401)):
            async with session.post(
                f"{gateway.v1}/chat/completions",
                json=body,
                headers={"Origin": ORIGIN, "Authorization": f"Bearer {auth}"},
            ) as reply:
                assert reply.status == status
                assert reply.headers["Access-Control-Allow-Origin"] == ORIGIN
                exposed = reply.headers["Access-Control-Expose-Headers"]
                for header in ("x-request-id", "x-ratelimit-remaining-requests", "retry-after"):
                    assert header in exposed
        async with session.get(
            f"{gateway.base_url}/health", headers={"Origin": ORIGIN}
        ) as outside_v1:
            assert "Access-Control-Allow-Origin" not in outside_v1.headers


async def test_a_failed_upstream_call_is_one_structured_line_and_a_metric(
    gateway: Gateway, key: str, engine: FakeEngine, caplog: pytest.LogCaptureFixture
) -> None:
    engine.behaviour = Behaviour(fail=503)
    with (
        caplog.at_level(logging.WARNING, logger="parley.upstream"),
        pytest.raises(openai.APIStatusError) as failed,
    ):
        await gateway.client(key).chat.completions.create(model="chat-large", messages=MESSAGES)
    (line,) = [r for r in caplog.records if r.name == "parley.upstream"]
    fields = line.fields  # type: ignore[attr-defined]
    assert line.getMessage() == "upstream call failed"
    assert fields["channel"] == "engine"
    assert fields["model"] == "chat-large"
    assert fields["status"] == 503
    assert fields["error"] == "UpstreamRefused"
    assert fields["request_id"] == failed.value.response.headers["x-request-id"]
    assert fields["latency_ms"] >= 0
    assert CHANNEL_KEY not in caplog.text
    assert key not in caplog.text
    assert "hello there friend" not in caplog.text

    samples = await scrape(gateway)
    errors = {"channel": "engine", "status": "503", "error": "UpstreamRefused"}
    assert value(samples, "parley_upstream_errors_total", **errors) == 1
    assert value(samples, "parley_requests_total", model="chat-large", status="502") == 1


async def test_limiter_refusals_and_stream_first_bytes_are_counted(
    gateway: Gateway,
) -> None:
    limited = await gateway.key(await gateway.group("limited", rpm=1))
    broke = await gateway.key(await gateway.group("broke", budget_nanos=0))
    client = gateway.client(limited)
    stream = await client.chat.completions.create(
        model="chat-large", messages=MESSAGES, stream=True
    )
    _ = [chunk async for chunk in stream]
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(model="chat-large", messages=MESSAGES)
    with pytest.raises(openai.RateLimitError) as quota:
        await gateway.client(broke).chat.completions.create(model="chat-large", messages=MESSAGES)
    assert quota.value.code == "insufficient_quota"

    samples = await scrape(gateway)
    decisions = "parley_limiter_decisions_total"
    assert value(samples, decisions, decision="admitted") == 1
    assert value(samples, decisions, decision="refused_requests") == 1
    assert value(samples, decisions, decision="refused_budget") == 1
    assert value(samples, "parley_stream_first_byte_seconds_count", model="chat-large") == 1


async def test_an_upstream_404_is_logged_with_what_it_likely_means_once_a_while(
    start_gateway: StartGateway,
    engine: FakeEngine,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A channel whose base URL lacks its ``/v1`` answers every call 404. The failure line
    then says where to look (the channel's base URL, the model's upstream name), naming
    the channel and the upstream model, in the test button's words; once per channel a
    while, not on every call of a flood. Never the key, never the address."""
    monkeypatch.setattr(upstream, "HINT_EVERY_SECONDS", 0.5)
    async with FakeAudioEngine.plain() as speaker:

        def tweak(config: dict[str, Any]) -> None:
            config["channels"][0]["base_url"] = engine.endpoint
            config["channels"].append(
                {
                    "name": "speaker",
                    "type": "openai-audio",
                    "base_url": speaker.endpoint,
                    "api_key": CHANNEL_KEY,
                    "models": [{"name": "tts", "upstream": "kokoro"}],
                }
            )
            config["models"].append({"name": "tts", "kind": "speech"})

        gateway = await start_gateway(tweak)
        key = await gateway.key(await gateway.group("team"))
        chat = {"model": "chat-large", "messages": MESSAGES}
        speech = {"model": "tts", "input": "Hello.", "voice": "af_heart"}
        with caplog.at_level(logging.WARNING, logger="parley.upstream"):
            for _ in range(3):
                assert (await call(gateway, "POST", CHAT, key, json=chat))[0] == 502
            assert (await call(gateway, "POST", "/v1/audio/speech", key, json=speech))[0] == 502
            await asyncio.sleep(0.6)
            assert (await call(gateway, "POST", CHAT, key, json=chat))[0] == 502

    lines = [r for r in caplog.records if r.name == "parley.upstream"]
    fields = [line.fields for line in lines]  # type: ignore[attr-defined]
    assert [(f["channel"], f["status"]) for f in fields] == [("engine", 404)] * 3 + [
        ("speaker", 404),
        ("engine", 404),
    ]
    assert [f["upstream_model"] for f in fields] == ["upstream-chat"] * 3 + ["kokoro"] + [
        "upstream-chat"
    ]
    hinted = ["hint" in f for f in fields]
    assert hinted == [True, False, False, True, True]  # per channel, again after a while
    chat_hint, speech_hint = fields[0]["hint"], fields[3]["hint"]
    assert "channel `engine`" in chat_hint and "`upstream-chat`" in chat_hint
    assert "check the channel's base URL" in chat_hint and "/v1" in chat_hint
    assert "channel `speaker`" in speech_hint and "`kokoro`" in speech_hint
    assert CHANNEL_KEY not in caplog.text
    assert engine.endpoint not in caplog.text and speaker.endpoint not in caplog.text
