"""``bench.usage_workers`` runs end to end, tiny: both ways of writing (each worker its own,
and the host's usage writer) start, meter every record offered and stop. The figures
are not checked (they are measurements, not results); the bench checks itself that the
database holds every admitted record."""

from __future__ import annotations

import subprocess
import sys

from tests.process.procs import REPO

RUN_GUARD = 120.0
"""Not a measurement: only stops a broken bench from hanging the suite."""


def test_both_writers_meter_every_record_offered() -> None:
    command = [sys.executable, "-m", "bench.usage_workers", "--processes", "2"]
    command += ["--rate", "400", "--seconds", "1"]
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=RUN_GUARD, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["sqlite", "sqlite/host"]
    assert all("refused       0 (  0.0%)" in line for line in lines), lines
    assert all("host writer" in line for line in lines[1:])
