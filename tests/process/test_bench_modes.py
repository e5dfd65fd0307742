"""``bench.load``'s scale modes run end to end, tiny (a few streams, one short round): every
process starts and stops, the figures are gathered, and Parley meters every stream. The
figures themselves are not checked (they are measurements, not results)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.kernel import somaxconn
from tests.process.procs import REPO

RUN_GUARD = 400.0
"""Not a measurement: only stops a broken bench from hanging the suite."""


def bench(tmp_path: Path, *args: str) -> dict[str, Any]:
    output = tmp_path / "report.json"
    command = [sys.executable, "-m", "bench.load", "--rounds", "1", "--json", str(output), *args]
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=RUN_GUARD, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report: dict[str, Any] = json.loads(output.read_text())
    return report


def test_slow_streams_all_complete_through_both_relays_and_parley_meters_each(
    tmp_path: Path,
) -> None:
    report = bench(
        tmp_path, "--slow-streams", "6", "--slow-delay", "0.01",
        "--slow-after", "0.1", "--slow-later", "0.2",
    )  # fmt: skip

    rows = {row["target"]: row for row in report["slow_streams"]}
    assert set(rows) == {"bare", "parley"}
    for row in rows.values():
        assert (row["completed"], row["errors"]) == (6, 0), row["first_error"]
        assert 0 < row["ttfb_p50_ms"] <= row["ttfb_p99_ms"] <= row["total_p99_ms"]
        assert row["rss_peak_mb"] >= row["rss_before_mb"] > 0
        if shutil.which("ss") is not None:  # both relays listen with Parley's default
            assert row["backlog"] == min(16384, somaxconn() or 16384)
    assert report["metering"] == {"succeeded": 2 + 6, "metered": 2 + 6}
    assert report["memory_read_s"] == {"after": 0.1, "later": 0.2}


def test_messages_run_through_parley_alone_read_against_the_bare_relays_stream(
    tmp_path: Path,
) -> None:
    report = bench(
        tmp_path, "--targets", "bare,parley", "--scenarios", "messages",
        "--duration", "0.5", "--warmup", "0.2",
    )  # fmt: skip

    rows = [(row["target"], row["mode"]) for row in report["results"]]
    assert rows == [("bare", "stream"), ("parley", "stream"), ("parley", "messages")]
    for row in report["results"]:  # a Messages stream counts once its message_stop came
        assert row["requests"] > 0 and row["errors"] == 0, row["first_error"]
    assert set(report["ratios"]) == {"stream", "messages"}
    assert report["ratios"]["messages"]["throughput"] > 0
    succeeded = report["metering"]["succeeded"]
    assert report["metering"] == {"succeeded": succeeded, "metered": succeeded}


def test_before_serves_a_second_checkout_in_the_same_rounds_on_its_own_database(
    tmp_path: Path,
) -> None:
    """``--before`` with this very checkout: both Parleys run every round, each with its
    own key and database, and each meters exactly its own calls (one database for both
    would count the other's too)."""
    report = bench(
        tmp_path, "--targets", "bare,parley", "--before", str(REPO), "--scenarios", "plain",
        "--duration", "0.5", "--warmup", "0.2",
    )  # fmt: skip

    rows = [(row["target"], row["mode"]) for row in report["results"]]
    assert rows == [("bare", "plain"), ("parley", "plain"), ("before", "plain")]
    for row in report["results"]:
        assert row["requests"] > 0 and row["errors"] == 0, row["first_error"]
    for name in ("ratios", "ratios_before", "ratios_after_before"):
        assert report[name]["plain"]["throughput"] > 0
    for name in ("metering", "metering_before"):
        succeeded = report[name]["succeeded"]
        assert succeeded > 2 and report[name] == {"succeeded": succeeded, "metered": succeeded}


def test_before_must_be_a_checkout(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bench.load", "--before", str(tmp_path)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)

    assert done.returncode == 2
    assert f"--before {tmp_path}: no parley package there" in done.stderr


def test_workers_mode_runs_each_relay_with_one_and_n_workers(tmp_path: Path) -> None:
    report = bench(
        tmp_path, "--workers", "2", "--scenarios", "plain", "--duration", "0.5", "--warmup", "0.2"
    )

    targets = [row["target"] for row in report["results"]]
    assert targets == ["bare-1", "parley-1", "bare-2", "parley-2"]
    for row in report["results"]:
        assert row["requests"] > 0 and row["errors"] == 0, row["first_error"]
    processes = {row["target"]: row["rss_each_mb"]["server"] for row in report["results"]}
    assert len(processes["parley-1"]) == 1
    assert len(processes["parley-2"]) >= 3  # the supervisor and its two workers
    assert len(processes["bare-2"]) >= 3
    assert set(report["scaling"]) == {"bare", "parley"}
    assert set(report["scaling"]["parley"]) == {"plain"}


def test_stream_cost_runs_the_bare_relay_on_either_client_and_parley(tmp_path: Path) -> None:
    """Without valgrind (CPU time only): each target relays every stream whole, through
    aiohttp's client, Parley's, and Parley itself."""
    command = [sys.executable, "-m", "bench.stream_cost", "--no-valgrind", "--delay", "0.005"]
    command += ["--targets", "bare,bare-parley-client,parley", "--streams", "4", "--warmup", "2"]
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=RUN_GUARD, check=False
    )

    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    for target in ("bare", "bare-parley-client", "parley"):
        (line,) = [line for line in lines if line.split()[0] == target]
        assert "4 streams, 0 failed" in line
