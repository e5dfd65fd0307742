"""Prometheus metrics, served at ``GET /metrics`` (prometheus-client's text format).

Every call is counted once, from the meter's finished record (``finished``): requests
and latency per model and status, tokens and cost per group and model. The other
series come from the one place each happens: time to the first byte of a stream, each
failed upstream attempt per channel, each limiter decision, each usage-writer batch
(its latency), each circuit breaker transition (with the breaker's state as a gauge),
and, at scrape time, the usage-writer queue depth, the age of the directory's last
refresh from the store, and the planner's totals of failovers, retries the retry budget
refused and calls a fallback model answered, and the deleted clones still to delete on
their engines with the attempts at it; with OpenTelemetry export on, the spans it
dropped (``parley_otel_spans_dropped_total``, counted from the exporter's thread).

The hot path pays a dict look-up and a few additions to plain numbers per call (and per
stream's first byte); they are folded into the series at every scrape and once a
second (``fold``), so
prometheus-client's locked increments cost once per label set per second, not per call.

Workers: with ``serve --workers N`` every worker writes its values to files in one
directory (prometheus-client's multiprocess mode, chosen by ``serve`` before the workers
start) and a scrape, whichever worker takes it, adds up all of them; gauges are summed
over live workers (queue depth) or take the stalest worker (refresh age). With one
worker the registry is the process's own. Either way the registry belongs to the app,
never to a module global.
"""

from __future__ import annotations

import glob
import os
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from parley.domain.usage import UsageRecord

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
FIRST_BYTE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
WRITE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
NANOS_PER_USD = 1_000_000_000
REFRESH_TIMESTAMP = "parley_directory_last_refresh_timestamp_seconds"
_FILE_HEADER_BYTES = 8
"""A multiprocess file's header: the bytes used (4) and padding (4)."""


class GatewayMetrics:
    """The gateway's series on a registry of its own (or multiprocess files)."""

    def __init__(self, *, multiprocess_dir: str | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "parley_requests",
            "Calls metered, by model and status.",
            ["model", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "parley_request_duration_seconds",
            "Time from admission to the end of the reply, by model and status.",
            ["model", "status"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.first_byte = Histogram(
            "parley_stream_first_byte_seconds",
            "Time from admission to the first byte of a streamed reply, by model.",
            ["model"],
            buckets=FIRST_BYTE_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "parley_tokens",
            "Tokens metered, by group, model and direction (prompt or completion).",
            ["group", "model", "direction"],
            registry=r,
        )
        self.cost = Counter(
            "parley_cost_usd",
            "Cost metered in USD, by group and model.",
            ["group", "model"],
            registry=r,
        )
        self.upstream_errors = Counter(
            "parley_upstream_errors",
            "Failed upstream attempts, by channel, status (0: no reply) and error class.",
            ["channel", "status", "error"],
            registry=r,
        )
        self.limiter = Counter(
            "parley_limiter_decisions",
            "Admission decisions: admitted, or refused by requests, tokens or budget.",
            ["decision"],
            registry=r,
        )
        self.write_latency = Histogram(
            "parley_usage_write_seconds",
            "Time to write one batch of usage records, by outcome.",
            ["outcome"],
            buckets=WRITE_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "parley_usage_queue_depth",
            "Usage records waiting for the writer.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.batch_lines = Gauge(
            "parley_batch_lines_in_flight",
            "Batch lines in flight, by the channel the lane counted each on.",
            ["channel"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.realtime_sessions = Gauge(
            "parley_realtime_sessions",
            "Realtime sessions open now, by public model.",
            ["model"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.batch_share = Gauge(
            "parley_batch_lane_share",
            "The batch lane's share of each channel: the most batch lines it may have in "
            "flight there now.",
            ["channel"],
            registry=r,
            multiprocess_mode="livesum",
        )
        self.batch_queued = Gauge(
            "parley_batch_lines_queued",
            "Batch lines waiting to be sent, in every batch in progress, as the lane last "
            "counted them (the queue is the database's, shared by every lane).",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.refusals_dropped = Counter(
            "parley_request_log_refusals_dropped",
            "Refusals not written to the request log: the usage queue was past half full.",
            registry=r,
        )
        self._refusals_dropped_seen = 0
        self.spans_dropped = Counter(
            "parley_otel_spans_dropped",
            "OpenTelemetry spans lost: queue_full (the export queue was full) or "
            "export_failed (the collector refused or did not answer).",
            ["reason"],
            registry=r,
        )
        self.content_dropped = Counter(
            "parley_content_dropped",
            "Calls' content a group's policy keeps that was not stored, by reason: "
            "queue_full (the writer's queue was full), no_key (no secret key to seal it), "
            "write_failed (the database refused the batch), failed, shutdown.",
            ["reason"],
            registry=r,
        )
        self._content_dropped_seen: dict[str, int] = {}
        self.content_written = Counter(
            "parley_content_written",
            "Calls' content stored by the content log.",
            registry=r,
        )
        self._content_written_seen = 0
        self.content_queue = Gauge(
            "parley_content_queue_depth",
            "Calls' content waiting for the content log's writer.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.refreshed_at = Gauge(
            REFRESH_TIMESTAMP,
            "When the key and group directory was last read from the store (Unix time).",
            registry=r,
            multiprocess_mode="livemin",
        )
        self.channel_state = Gauge(
            "parley_channel_state",
            "Circuit breaker state by channel and upstream model (empty: the whole "
            "channel): 0 closed, 1 open, 2 half-open.",
            ["channel", "model"],
            registry=r,
            multiprocess_mode="livemax",
        )
        self.breaker_transitions = Counter(
            "parley_breaker_transitions",
            "Circuit breaker transitions, by channel, upstream model and new state.",
            ["channel", "model", "state"],
            registry=r,
        )
        self.failovers = Counter(
            "parley_failovers",
            "Attempts made after a failed one (to the next channel or a fallback model).",
            registry=r,
        )
        self.retries_refused = Counter(
            "parley_retries_refused",
            "Failovers the process's retry budget turned down.",
            registry=r,
        )
        self.fallbacks = Counter(
            "parley_fallbacks",
            "Calls answered by a fallback model, by the model asked for and the fallback.",
            ["model", "fallback"],
            registry=r,
        )
        self.deletions_pending = Gauge(
            "parley_voice_deletions_pending",
            "Deleted clones whose copies on their engines are still to delete.",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.deletion_attempts = Counter(
            "parley_voice_deletion_attempts",
            "Attempts at deleting a deleted clone on its engine, by outcome "
            "(deleted: the engine no longer holds it; failed: tried again later).",
            ["outcome"],
            registry=r,
        )
        self._deletions_seen = (0, 0)
        self._routed = (0, 0)
        self._fell_back: dict[tuple[str, str], int] = {}
        self._first_bytes: dict[str, _Tally] = {}
        self._admitted = self.limiter.labels("admitted")
        self._tallies: dict[tuple[str, str, int], _Tally] = {}

    def finished(self, group: str, record: UsageRecord) -> None:
        """One metered call (the meter calls this once per record; every metered call was
        admitted, so it also counts the limiter's admissions).

        This is on every call's path, so it only adds to plain numbers (about a tenth of
        the cost of prometheus-client's locked increments); ``fold`` moves them into the
        series, at every scrape and once a second.
        """
        key = (group, record.model, record.status)
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = _Tally(LATENCY_BUCKETS)
        seconds = record.latency_ms / 1000
        tally.count += 1
        tally.seconds += seconds
        tally.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        tally.prompt += record.prompt_tokens
        tally.completion += record.completion_tokens
        tally.cost_nanos += record.cost_nanos

    def fold(self) -> None:
        """Move the calls counted since the last fold into the series."""
        first_bytes, self._first_bytes = self._first_bytes, {}
        for model, timings in first_bytes.items():
            _add_to_histogram(self.first_byte.labels(model), timings)
        tallies, self._tallies = self._tallies, {}
        for (group, model, status), tally in tallies.items():
            self._admitted.inc(tally.count)
            self.requests.labels(model, str(status)).inc(tally.count)
            _add_to_histogram(self.latency.labels(model, str(status)), tally)
            if tally.prompt or tally.completion or tally.cost_nanos:
                self.tokens.labels(group, model, "prompt").inc(tally.prompt)
                self.tokens.labels(group, model, "completion").inc(tally.completion)
                self.cost.labels(group, model).inc(tally.cost_nanos / NANOS_PER_USD)

    def refused(self, decision: str) -> None:
        """``requests``, ``tokens`` (rate limits) or ``budget``."""
        self.limiter.labels(f"refused_{decision}").inc()

    def stream_started(self, model: str, seconds: float) -> None:
        """A stream's first byte: counted in plain numbers, folded like ``finished``."""
        timings = self._first_bytes.get(model)
        if timings is None:
            timings = self._first_bytes[model] = _Tally(FIRST_BYTE_BUCKETS)
        timings.count += 1
        timings.seconds += seconds
        timings.buckets[bisect_left(FIRST_BYTE_BUCKETS, seconds)] += 1

    def spans_lost(self, reason: str, count: int) -> None:
        """Spans dropped by the OTLP export (called from its thread; the counter locks)."""
        self.spans_dropped.labels(reason).inc(count)

    def upstream_failed(self, channel: str, status: int, error: str) -> None:
        self.upstream_errors.labels(channel, str(status), error).inc()

    def breaker_moved(self, channel: str, model: str, state: int, name: str) -> None:
        """A breaker's transition (rare: counted and set at once)."""
        self.channel_state.labels(channel, model).set(state)
        self.breaker_transitions.labels(channel, model, name).inc()

    def routed(self, failovers: int, refused: int, fallbacks: dict[tuple[str, str], int]) -> None:
        """The planner's running totals: what grew since the last call is added."""
        before_failovers, before_refused = self._routed
        self.failovers.inc(failovers - before_failovers)
        self.retries_refused.inc(refused - before_refused)
        self._routed = (failovers, refused)
        for pair, count in fallbacks.items():
            grown = count - self._fell_back.get(pair, 0)
            if grown:
                self.fallbacks.labels(*pair).inc(grown)
                self._fell_back[pair] = count

    def clone_deletions(self, deleted: int, failed: int, pending: int | None) -> None:
        """The clone deletions' running totals (what grew since the last call is added)
        and how many are still to do, when known."""
        before_deleted, before_failed = self._deletions_seen
        self.deletion_attempts.labels("deleted").inc(deleted - before_deleted)
        self.deletion_attempts.labels("failed").inc(failed - before_failed)
        self._deletions_seen = (deleted, failed)
        if pending is not None:
            self.deletions_pending.set(pending)

    def batch_written(self, seconds: float, ok: bool) -> None:
        self.write_latency.labels("ok" if ok else "failed").observe(seconds)

    def sample(
        self, queue_depth: int, refreshed_at: float | None, refusals_dropped: int = 0
    ) -> None:
        """The calls counted since the last sample, and the gauges from the state they
        describe (at scrape time, and once a second for the other workers' sake);
        ``refusals_dropped`` is the usage writer's running count."""
        self.fold()
        self.queue_depth.set(queue_depth)
        if refusals_dropped > self._refusals_dropped_seen:
            self.refusals_dropped.inc(refusals_dropped - self._refusals_dropped_seen)
            self._refusals_dropped_seen = refusals_dropped
        if refreshed_at is not None:
            self.refreshed_at.set(refreshed_at)

    def content(self, backlog: int, written: int, dropped: Mapping[str, int]) -> None:
        """The content log's queue, and its running counts (added as they grow)."""
        self.content_queue.set(backlog)
        if written > self._content_written_seen:
            self.content_written.inc(written - self._content_written_seen)
            self._content_written_seen = written
        for reason, count in dropped.items():
            seen = self._content_dropped_seen.get(reason, 0)
            if count > seen:
                self.content_dropped.labels(reason).inc(count - seen)
                self._content_dropped_seen[reason] = count

    def batch_lane(
        self, in_flight: Mapping[str, int], shares: Mapping[str, int], queued: int = 0
    ) -> None:
        """The batch lane's lines in flight per channel (0 for a channel it has left),
        its share of each channel it has heard of, and the lines waiting."""
        self.batch_queued.set(queued)
        for channel, count in in_flight.items():
            self.batch_lines.labels(channel).set(count)
        for channel, share in shares.items():
            self.batch_share.labels(channel).set(share)

    def live_sessions(self, by_model: Mapping[str, int]) -> None:
        """The realtime sessions open per model (0 for a model whose sessions ended)."""
        for model, count in by_model.items():
            self.realtime_sessions.labels(model).set(count)

    def exposition(self) -> bytes:
        """The text a scrape gets: this process's series, or every worker's added up."""
        if self.multiprocess_dir is None:
            return generate_latest(_WithRefreshAge(self.registry))
        merged = CollectorRegistry()
        merged.register(_WorkerFiles(self.multiprocess_dir))
        return generate_latest(_WithRefreshAge(merged))


class _Tally:
    """One (group, model, status)'s calls since the last fold, in plain numbers (or one
    model's streams' first bytes: then only the count, seconds and buckets)."""

    __slots__ = ("buckets", "completion", "cost_nanos", "count", "prompt", "seconds")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.count = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(bounds) + 1)
        """Calls per latency bucket (``le`` each bound, the last one ``+Inf``)."""
        self.prompt = 0
        self.completion = 0
        self.cost_nanos = 0


def _add_to_histogram(histogram: Histogram, tally: _Tally) -> None:
    """Add a tally's observations to a histogram child, bucket by bucket.

    prometheus-client observes one value at a time; the child keeps one value per bucket
    (not cumulative) and the sum, which this adds to directly, as ``observe`` would have
    for each call. ``tests/api/test_operator_telemetry.py`` checks the exposition.
    """
    child: Any = histogram
    child._sum.inc(tally.seconds)
    for bucket, count in zip(child._buckets, tally.buckets, strict=True):
        if count:
            bucket.inc(count)


class _WorkerFiles(Collector):
    """Every worker's series, read from the shared folder: what ``MultiProcessCollector``
    does, less the files a worker has created but not yet sized.

    prometheus-client opens a worker's file empty and sizes it a moment later; a scrape
    reading it in between failed with ``struct.error`` (a 500 for ``/metrics``), so a file
    shorter than its 8-byte header is left for the next scrape: it holds no value yet.
    """

    def __init__(self, folder: str) -> None:
        self._folder = folder

    def collect(self) -> Iterable[Metric]:
        files = [path for path in glob.glob(os.path.join(self._folder, "*.db")) if _sized(path)]
        merged: Iterable[Metric] = MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-untyped-call]
        return merged


def _sized(path: str) -> bool:
    try:
        return os.stat(path).st_size >= _FILE_HEADER_BYTES
    except FileNotFoundError:  # a dead worker's live gauges, removed since the listing
        return False


class _WithRefreshAge(Collector):
    """The registry's series plus the refresh age, derived from the stalest timestamp."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        families = list(self._source.collect())
        yield from families
        yield from _refresh_age(families)


def _refresh_age(families: list[Metric]) -> Iterator[Metric]:
    stamps = [
        sample.value
        for family in families
        if family.name == REFRESH_TIMESTAMP
        for sample in family.samples
        if sample.value > 0
    ]
    if stamps:
        age = GaugeMetricFamily(
            "parley_directory_refresh_age_seconds",
            "Seconds since the stalest worker last read keys and groups from the store.",
        )
        age.add_metric([], max(0.0, time.time() - min(stamps)))
        yield age
