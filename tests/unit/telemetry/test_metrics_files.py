"""``/metrics`` with workers reads every worker's file from a shared folder; a worker
that is creating its file at the moment of a scrape must not fail the scrape."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.parser import text_string_to_metric_families

from parley.telemetry.metrics import GatewayMetrics


def write_counter(folder: Path, pid: int, model: str, value: float) -> None:
    """A worker's counter file, as prometheus-client's multiprocess mode writes it."""
    values = MmapedDict(str(folder / f"counter_{pid}.db"))
    key = mmap_key(
        "parley_requests",
        "parley_requests_total",
        ("model", "status"),
        (model, "200"),
        "Calls metered, by model and status.",
    )
    values.write_value(key, value, 0.0)
    values.close()


def requests_total(text: str) -> float:
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "parley_requests_total"
    )


def test_a_scrape_adds_up_every_workers_file(tmp_path: Path) -> None:
    write_counter(tmp_path, 101, "m", 3)
    write_counter(tmp_path, 102, "m", 4)
    metrics = GatewayMetrics(multiprocess_dir=str(tmp_path))
    assert requests_total(metrics.exposition().decode()) == 7


def test_a_file_a_worker_has_just_created_is_left_for_the_next_scrape(tmp_path: Path) -> None:
    write_counter(tmp_path, 101, "m", 3)
    (tmp_path / "counter_102.db").touch()  # opened by its worker, not sized yet
    (tmp_path / "gauge_livesum_102.db").write_bytes(b"\0\0")  # a header half there
    metrics = GatewayMetrics(multiprocess_dir=str(tmp_path))
    assert requests_total(metrics.exposition().decode()) == 3


def test_refusals_the_request_log_dropped_are_counted_once(tmp_path: Path) -> None:
    metrics = GatewayMetrics()

    def dropped() -> float:
        return sum(
            sample.value
            for family in text_string_to_metric_families(metrics.exposition().decode())
            for sample in family.samples
            if sample.name == "parley_request_log_refusals_dropped_total"
        )

    metrics.sample(0, None, 3)
    metrics.sample(0, None, 3)
    assert dropped() == 3
    metrics.sample(0, None, 5)
    assert dropped() == 5
