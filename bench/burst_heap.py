"""Where a worker's memory is after a burst of slow streams, and what keeps it there.

    python -m bench.burst_heap --streams 3000

Starts the fake upstream and one Parley worker (SQLite, memory limiter, the bench's
config) *in a wrapper* that answers SIGUSR1 with a probe taken inside the worker: RSS,
pymalloc's arenas (``sys._debugmallocstats``: arenas, bytes in used blocks, in the free
blocks of used pools, and in unused pools) and glibc's heap (``mallinfo2``: in use and
free). It probes before the burst (and marks the arenas that exist), then holds N slow
streams (``bench.slowgen``), probes 1, 12 and 30 s after they closed, then once more
after a full collection, the method cache's clearing and ``malloc_trim`` (what
``parley.heap.sweep`` does), and lists what lives in the arenas the burst made
(``bench/arenas.py``: CPython 3.11 on Linux only). Nothing here runs in CI.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness
from bench.kernel import rss_mb
from bench.processes import Services, free_ports, wait_until_ready

PROBE_DIR = "BURST_HEAP_DIR"


MALLINFO2 = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks")
MALLINFO2 += ("uordblks", "fordblks", "keepcost")


class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in MALLINFO2]


def _pymalloc(folder: Path) -> dict[str, int]:
    """The summary of ``sys._debugmallocstats`` (written to fd 2, so caught through a file)."""
    path = folder / "debugmallocstats.txt"
    with path.open("w") as out:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    text = path.read_text()
    wanted = {
        "arenas": r"# arenas allocated current\s*=\s*([\d,]+)",
        "used": r"# bytes in allocated blocks\s*=\s*([\d,]+)",
        "free_in_pools": r"# bytes in available blocks\s*=\s*([\d,]+)",
        "unused_pools": r"(\d+) unused pools \*",
    }
    found = {k: re.search(pattern, text) for k, pattern in wanted.items()}
    return {k: int(m.group(1).replace(",", "")) if m else -1 for k, m in found.items()}


def _probe_worker(argv: list[str]) -> None:
    """In the worker: answer SIGUSR1, then run ``parley`` with ``argv``."""
    from bench import arenas

    folder = Path(os.environ[PROBE_DIR])
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    marked: set[int] = set()

    def stats(step: str) -> dict[str, Any]:
        info = libc.mallinfo2()
        status = Path("/proc/self/status").read_text()
        rss = re.search(r"VmRSS:\s+(\d+)", status)
        return {
            "step": step,
            "rss_mb": int(rss.group(1)) / 1024 if rss else -1,
            "pymalloc": _pymalloc(folder),
            "glibc": {"in_use": info.uordblks, "free": info.fordblks, "heap": info.arena},
        }

    def probe(signum: int, frame: object) -> None:
        label, *actions = (folder / "command").read_text().split()
        record: dict[str, Any] = {"steps": [stats(label)]}
        for action in actions:
            if action == "mark" and arenas.supported():
                marked.update(address for address, _ in arenas.arenas())
            elif action == "sweep":
                from parley.heap import malloc_trim, sweep

                began = time.perf_counter()
                sweep()
                record["sweep_ms"] = (time.perf_counter() - began) * 1000
                trim = malloc_trim()
                if trim is not None:
                    trim()
                record["steps"].append(stats(label + "+sweep"))
            elif action == "survey" and arenas.supported():
                record["survey"] = arenas.survey(marked)
        (folder / "record.tmp").write_text(json.dumps(record))
        (folder / "record.tmp").rename(folder / f"{label}.json")

    signal.signal(signal.SIGUSR1, probe)
    from parley.cli import main

    sys.argv = ["parley", *argv]
    main()


def _ask(folder: Path, pid: int, label: str, *actions: str) -> dict[str, Any]:
    (folder / "command").write_text(" ".join([label, *actions]))
    os.kill(pid, signal.SIGUSR1)
    answer = folder / f"{label}.json"
    deadline = time.monotonic() + 120
    while not answer.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"no answer to the probe {label!r}")
        time.sleep(0.1)
    record: dict[str, Any] = json.loads(answer.read_text())
    for step in record["steps"]:
        pym, glibc = step["pymalloc"], step["glibc"]
        print(
            f"{step['step']:<14}{step['rss_mb']:>8.1f}{pym['arenas']:>8}"
            f"{pym['used'] / 2**20:>10.1f}{pym['free_in_pools'] / 2**20:>10.1f}"
            f"{pym['unused_pools'] * 16 / 1024:>10.1f}"
            f"{glibc['in_use'] / 2**20:>10.1f}{glibc['free'] / 2**20:>10.1f}",
            flush=True,
        )
    return record


def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="burst-heap-"))
    os.environ[PROBE_DIR] = str(work)
    with Services(work) as services:
        up_port, port = free_ports(2)
        command = ["-m", "bench.upstream", "--port", str(up_port), "--slow-delay", "0.1"]
        upstream = services.start("upstream", up_port, command)
        wait_until_ready(upstream)
        config = harness.write_parley_config(work / "parley", port, up_port)
        key = harness.create_key(config)
        command = ["-m", "bench.burst_heap", "--worker", "serve", "--config", str(config)]
        parley = services.start("parley", port, command, cwd=Path.cwd())
        wait_until_ready(parley, "/health")
        harness.smoke_test("parley", port, key)
        print(
            f"{'probe':<14}{'RSS MB':>8}{'arenas':>8}{'pym used':>10}{'in pools':>10}"
            f"{'unused':>10}{'glibc use':>10}{'glibc free':>10}   (MB)"
        )
        _ask(work, parley.pid, "before", "mark")
        generator = [
            sys.executable, "-m", "bench.slowgen", "--streams", str(args.streams),
            "--url", f"http://127.0.0.1:{port}{harness.PATH}", "--key", key,
            "--model", harness.SLOW_MODEL, "--watch", str(parley.pid),
        ]  # fmt: skip
        done = subprocess.run(generator, capture_output=True, text=True, check=True)
        closed = time.monotonic()
        result = json.loads(done.stdout.splitlines()[-1])
        print(
            f"{result['completed']} of {args.streams} streams, peak RSS {result['rss_peak_mb']:.1f}"
        )
        for after in (1, 12, 30):
            time.sleep(max(0.0, closed + after - time.monotonic()))
            _ask(work, parley.pid, f"+{after}s")
        final = _ask(work, parley.pid, "end", "sweep", "survey")
        print(f"the sweep took {final['sweep_ms']:.1f} ms (parley.heap.sweep, on the loop)")
        print(f"RSS now {rss_mb(parley.pid) or 0:.1f} MB")
    survey = final.get("survey")
    if survey:
        print(
            f"\n{survey['new_arenas']} arenas made during the burst still held, by "
            f"{survey['used_pools']} used pools with {survey['used_blocks']:,} blocks; "
            f"blocks per arena: {survey['blocks_per_arena']}"
        )
        print("arenas holding each kind of block:", survey["arenas_holding"][:25])
        print("blocks of each kind:", survey["blocks"][:25])


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        _probe_worker(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=3000)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
