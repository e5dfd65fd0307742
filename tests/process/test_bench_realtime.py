"""``bench.realtime`` runs end to end, tiny (5 sessions, one short round): the fake realtime
upstream, the bare WebSocket relay and Parley start and stop, every session opens and
does whole turns through both, the figures are gathered, and Parley meters (and prices)
every turn. The figures themselves are not checked (they are measurements, not results)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from tests.process.procs import REPO

RUN_GUARD = 300.0
"""Not a measurement: only stops a broken bench from hanging the suite."""
EVENTS_PER_TURN = 1 + 1 + 1 + 3 + 1
"""``response.create``; ``response.created``, ``rate_limits.updated``, 3 deltas, ``.done``."""


def test_realtime_bench_relays_whole_turns_through_both_relays_and_parley_meters_each(
    tmp_path: Path,
) -> None:
    output = tmp_path / "report.json"
    command = [
        sys.executable, "-m", "bench.realtime", "--sessions", "5", "--rounds", "1",
        "--warmup", "0.2", "--duration", "1", "--deltas", "3", "--json", str(output),
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=RUN_GUARD, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(output.read_text())

    rows = {row["target"]: row for row in report["results"]}
    assert set(rows) == {"bare", "parley"}
    for row in rows.values():
        assert (row["opened"], row["errors"]) == (5, 0), row["first_error"]
        assert row["turns"] > 0 and row["turns_total"] >= row["turns"]
        # Whole turns, each counted where it ended: the window's edges cut one a session.
        assert (row["turns"] - 5) * EVENTS_PER_TURN <= row["events"]
        assert row["events"] <= (row["turns"] + 5) * EVENTS_PER_TURN
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["rss_open_mb"] > 0 and row["rss_idle_mb"] > 0
        assert row["us_cpu_per_event"] > 0 and not math.isnan(row["kb_per_session"])
    assert set(report["ratios"]) == {
        "memory per session", "CPU per event", "events/s", "turn p50", "turn p99",
    }  # fmt: skip
    turns = report["metering"]["turns"]
    assert turns > rows["parley"]["turns_total"]  # and the smoke session's
    assert report["metering"] == {"turns": turns, "metered": turns, "priced": turns}
