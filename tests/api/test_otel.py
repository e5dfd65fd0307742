"""OpenTelemetry GenAI traces and metrics, received by a real OTLP/HTTP collector
(``tests/upstreams/otlp_collector.py``) and decoded with the OpenTelemetry protobufs:
the call's span and one child span per upstream attempt, the caller's ``traceparent``
continued and the attempt's sent upstream, sampling, a collector down or slow, and no
prompt or reply content in any attribute."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.harness import Config, Gateway, StartGateway, call, starting
from tests.api.test_operator_telemetry import scrape
from tests.api.test_resilience import two_channels
from tests.upstreams.openai_compatible import Behaviour, FakeEngine
from tests.upstreams.otlp_collector import OtlpCollector, ReceivedSpan

PROMPT = "the secret word is marmalade"
MESSAGES: Any = [{"role": "user", "content": PROMPT}]
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
SERVER, CLIENT = 2, 3
ERROR = 2


@pytest.fixture
async def collector() -> AsyncIterator[OtlpCollector]:
    async with OtlpCollector() as running:
        yield running


@pytest.fixture
async def sick() -> AsyncIterator[FakeEngine]:
    async with FakeEngine(api_key="sk-channel-secret-0123456789") as running:
        yield running


def traced(endpoint: str, **otlp: Any) -> Any:
    def tweak(config: Config) -> None:
        config["telemetry"] = {
            "otlp": {"endpoint": endpoint, "schedule_delay_seconds": 0.05, **otlp}
        }

    return tweak


@pytest.fixture
async def start(
    engine: FakeEngine, sick: FakeEngine, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    """``chat-large`` on a channel ``sick`` tried first, and ``healthy`` after it."""
    async with starting(lambda: two_channels(sick.base_url, engine.base_url, tmp_path)) as go:
        yield go


async def flush(gateway: Gateway) -> None:
    tracer: Any = gateway.services.tracer
    await asyncio.get_running_loop().run_in_executor(None, tracer.flush)


async def chat(gateway: Gateway, key: str, **request: Any) -> tuple[int, Any]:
    return await call(
        gateway,
        "POST",
        "/v1/chat/completions",
        key,
        json={"model": "chat-large", "messages": MESSAGES, **request},
        headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
    )


def no_content(spans: list[ReceivedSpan]) -> None:
    for span in spans:
        values = [*span.attributes.values(), *(v for _, e in span.events for v in e.values())]
        assert not any(isinstance(v, str) and "marmalade" in v for v in values), span


async def test_a_call_that_fell_over_is_a_span_with_one_child_per_attempt(
    collector: OtlpCollector, start: StartGateway, engine: FakeEngine, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(fail=503)
    gateway = await start(traced(collector.endpoint))
    key = await gateway.key(await gateway.group("team"))
    status, body = await chat(gateway, key)
    assert status == 200, body
    await flush(gateway)

    (root,) = collector.named("chat chat-large")
    assert root.kind == SERVER
    assert (root.trace_id, root.parent_span_id) == (CALLER_TRACE, CALLER_SPAN)
    attempts = collector.named("chat upstream-chat")
    assert [a.attributes["parley.attempt"] for a in attempts] == [1, 2]
    assert {a.parent_span_id for a in attempts} == {root.span_id}
    assert {a.trace_id for a in attempts} == {CALLER_TRACE}
    assert all(a.kind == CLIENT for a in attempts)
    failed, answered = attempts
    assert failed.attributes["parley.channel"] == "sick"
    assert failed.attributes["parley.outcome"] == "failed"
    assert failed.attributes["parley.upstream_status"] == 503
    assert failed.attributes["error.type"] == "UpstreamRefused"
    assert failed.status == ERROR
    assert answered.attributes["parley.channel"] == "healthy"
    assert answered.attributes["parley.outcome"] == "answered"
    assert answered.attributes["gen_ai.response.model"] == "upstream-chat"
    assert answered.attributes["gen_ai.provider.name"] == "openai"
    assert answered.attributes["server.address"] == "127.0.0.1"
    assert answered.attributes["server.port"] == int(engine.base_url.split(":")[2].split("/")[0])

    a = root.attributes
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "chat-large"
    assert a["gen_ai.response.model"] == "upstream-chat"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.usage.input_tokens"] == body["usage"]["prompt_tokens"]
    assert a["gen_ai.usage.output_tokens"] == body["usage"]["completion_tokens"]
    assert a["gen_ai.response.finish_reasons"] == [
        choice["finish_reason"] for choice in body["choices"]
    ]
    assert a["parley.group"] == "team"
    assert a["parley.channel"] == "healthy"
    assert a["parley.attempts"] == 2
    assert a["parley.cost"] > 0
    assert a["http.response.status_code"] == 200
    assert root.resource["service.name"] == "parley"

    # Each attempt's request named its own span, in the caller's trace.
    (to_sick,) = [r for r in sick.requests if r.path.endswith("/chat/completions")]
    (to_healthy,) = [r for r in engine.requests if r.path.endswith("/chat/completions")]
    assert to_sick.headers["traceparent"] == f"00-{CALLER_TRACE}-{failed.span_id}-01"
    assert to_healthy.headers["traceparent"] == f"00-{CALLER_TRACE}-{answered.span_id}-01"
    no_content(collector.spans)


async def test_a_stream_span_has_its_time_to_first_token_and_metrics_go_over_otlp(
    collector: OtlpCollector, start: StartGateway, engine: FakeEngine
) -> None:
    gateway = await start(traced(collector.endpoint, metrics=True))
    key = await gateway.key(await gateway.group("team"))
    status, text = await chat(gateway, key, stream=True, stream_options={"include_usage": True})
    assert status == 200 and "[DONE]" in text
    await flush(gateway)

    (root,) = collector.named("chat chat-large")
    assert root.attributes["parley.time_to_first_token"] > 0
    assert root.attributes["gen_ai.usage.output_tokens"] > 0
    assert root.attributes["gen_ai.response.finish_reasons"] == ["stop"]  # the last chunk's
    (attempt,) = collector.named("chat upstream-chat")
    assert attempt.attributes["parley.outcome"] == "answered"
    assert attempt.parent_span_id == root.span_id
    no_content(collector.spans)

    usage = collector.metrics["gen_ai.client.token.usage"]
    kinds = {attrs["gen_ai.token.type"]: value for attrs, value in usage}
    assert set(kinds) == {"input", "output"}
    assert kinds["output"] == (1, root.attributes["gen_ai.usage.output_tokens"])  # count, sum
    ((duration_attrs, (count, _)),) = collector.metrics["gen_ai.client.operation.duration"]
    assert count == 1
    assert duration_attrs["gen_ai.request.model"] == "chat-large"
    assert duration_attrs["parley.group"] == "team"
    ((_, (first_count, _)),) = collector.metrics["gen_ai.server.time_to_first_token"]
    assert first_count == 1


async def test_a_failed_call_is_an_error_span(
    collector: OtlpCollector, start: StartGateway, engine: FakeEngine, sick: FakeEngine
) -> None:
    sick.behaviour = engine.behaviour = Behaviour(fail=500)
    gateway = await start(traced(collector.endpoint))
    key = await gateway.key(await gateway.group("team"))
    status, _ = await chat(gateway, key)
    assert status == 502
    await flush(gateway)
    (root,) = collector.named("chat chat-large")
    assert root.status == ERROR
    assert root.attributes["http.response.status_code"] == 502
    assert root.attributes["error.type"]
    assert root.attributes["parley.cost"] == 0
    outcomes = [a.attributes["parley.outcome"] for a in collector.named("chat upstream-chat")]
    assert outcomes == ["failed", "failed"]


async def test_at_sample_ratio_zero_nothing_is_exported_but_the_trace_goes_on(
    collector: OtlpCollector, start: StartGateway, sick: FakeEngine
) -> None:
    gateway = await start(traced(collector.endpoint, sample_ratio=0))
    key = await gateway.key(await gateway.group("team"))
    status, _ = await call(
        gateway,
        "POST",
        "/v1/chat/completions",
        key,
        json={"model": "chat-large", "messages": MESSAGES},
    )
    assert status == 200
    await flush(gateway)
    assert collector.spans == []
    (request,) = [r for r in sick.requests if r.path.endswith("/chat/completions")]
    flags = int(request.headers["traceparent"].rsplit("-", 1)[1], 16)
    assert flags & 1 == 0  # propagated, not sampled

    # A caller's sampled parent decides for its own call (parent-based sampling).
    status, _ = await chat(gateway, key)
    assert status == 200
    await flush(gateway)
    assert {span.trace_id for span in collector.spans} == {CALLER_TRACE}


async def test_a_collector_that_is_down_costs_calls_nothing_and_lost_spans_are_counted(
    start: StartGateway,
) -> None:
    gateway = await start(traced("http://127.0.0.1:9", timeout_seconds=0.2))
    key = await gateway.key(await gateway.group("team"))
    for _ in range(3):
        status, _ = await chat(gateway, key)
        assert status == 200
    await flush(gateway)
    samples = await scrape(gateway)
    lost = {labels["reason"]: v for labels, v in samples["parley_otel_spans_dropped_total"]}
    assert lost["export_failed"] == 6  # three calls, a call span and an attempt span each


async def test_a_full_export_queue_drops_spans_and_counts_them(
    collector: OtlpCollector, start: StartGateway
) -> None:
    collector.hold.clear()  # the collector takes exports and answers none of them yet
    gateway = await start(
        traced(collector.endpoint, max_queue_size=2, max_export_batch_size=2, timeout_seconds=30)
    )
    key = await gateway.key(await gateway.group("team"))
    for _ in range(4):
        status, _ = await chat(gateway, key)
        assert status == 200
    samples = await scrape(gateway)
    lost = {labels["reason"]: v for labels, v in samples["parley_otel_spans_dropped_total"]}
    # 8 spans; at most 2 in the export the collector holds and 2 queued behind it
    assert lost["queue_full"] >= 4
    collector.hold.set()
    await flush(gateway)
    assert len(collector.spans) == 8 - lost["queue_full"]


async def test_without_an_endpoint_no_tracer_runs_and_nothing_is_sent_upstream(
    start: StartGateway, sick: FakeEngine
) -> None:
    gateway = await start()
    key = await gateway.key(await gateway.group("team"))
    assert gateway.services.tracer.on is False
    assert gateway.services.http.extra_head is None
    status, _ = await chat(gateway, key)
    assert status == 200
    (request,) = [r for r in sick.requests if r.path.endswith("/chat/completions")]
    assert "traceparent" not in request.headers


async def test_a_stream_cut_after_it_started_is_an_event_on_the_call_span(
    collector: OtlpCollector, start: StartGateway, sick: FakeEngine
) -> None:
    sick.behaviour = Behaviour(drop_after=2)
    gateway = await start(traced(collector.endpoint))
    key = await gateway.key(await gateway.group("team"))
    status, _ = await chat(gateway, key, stream=True)
    assert status == 200  # the head had left; the stream then ended with an error event
    await flush(gateway)
    (root,) = collector.named("chat chat-large")
    assert root.status == ERROR
    ((event, attributes),) = root.events
    assert event == "parley.upstream_cut"
    assert attributes["parley.channel"] == "sick"
    (attempt,) = collector.named("chat upstream-chat")
    assert attempt.attributes["parley.outcome"] == "answered"  # it had started


async def test_each_batch_line_is_a_call_span_of_its_own(
    collector: OtlpCollector, start: StartGateway, engine: FakeEngine, sick: FakeEngine
) -> None:
    from tests.api.test_batches import chat_line, settled, submitted

    def batched(config: Config) -> None:
        traced(collector.endpoint)(config)
        config["batches"] = {"poll_seconds": 0.05, "adaptive": False}

    gateway = await start(batched)
    client = gateway.client(await gateway.key(await gateway.group("team")))
    batch = await submitted(client, [chat_line("a", "one"), chat_line("b", "two")])
    assert (await settled(client, batch.id)).status == "completed"
    await flush(gateway)

    lines = collector.named("chat chat-large")
    assert len(lines) == 2
    assert len({span.trace_id for span in lines}) == 2  # each line a trace of its own
    for span in lines:
        assert span.attributes["parley.group"] == "team"
        assert span.attributes["gen_ai.response.finish_reasons"] == ["stop"]
        assert span.attributes["http.response.status_code"] == 200
