"""What ``parley serve --workers N`` holds: each process's RSS, PSS and private memory.

Starts the fake upstream and ``parley serve --workers N`` (SQLite file, memory limiter
counted per worker, ``bench.load``'s config and key), waits for every worker to listen
and ``--settle`` seconds more, prints each process's memory from
``/proc/<pid>/smaps_rollup``, then drives ``--duration`` seconds of whole chat calls over
64 connections (``bench.loadgen``) and prints it again.

RSS counts every resident page a process maps, shared or not; PSS divides each shared page
among the processes that map it (the sum over the processes is what they cost together);
private (USS) is what one more worker adds. With ``--workers 1`` the one process serves
(no supervisor), as ``parley serve`` alone runs. Workers forked from a supervisor that imported
the web stack share its pages (``parley/cli/supervisor.py``); workers started as fresh
interpreters share only their libraries' files. ``--root`` runs another checkout.

    python -m bench.worker_memory --workers 4
    python -m bench.worker_memory --workers 4 --root /path/to/other/checkout
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.harness import create_key, drive, write_parley_config
from bench.kernel import children
from bench.processes import Services, free_ports, wait_until_ready

REPO = Path(__file__).resolve().parents[1]
SHOWN = ("Rss", "Pss", "Private")


def memory_mb(pid: int) -> dict[str, float]:
    """RSS, PSS and private memory of ``pid``, in MiB."""
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":")
        fields[name] = int(value.split()[0]) / 1024
    fields["Private"] = fields["Private_Clean"] + fields["Private_Dirty"]
    return fields


def report(label: str, supervisor: int, workers: list[int]) -> None:
    print(f"{label}:")
    rows = [(f"worker {n}", pid) for n, pid in enumerate(workers)]
    if workers != [supervisor]:
        rows.insert(0, ("supervisor", supervisor))
    total = 0.0
    for name, pid in rows:
        memory = memory_mb(pid)
        total += memory["Pss"]
        print(f"  {name:<11}" + "".join(f"{key} {memory[key]:6.1f}   " for key in SHOWN))
    each = [memory_mb(pid) for pid in workers]
    mean = {key: sum(m[key] for m in each) / len(each) for key in SHOWN}
    print(f"  {'per worker':<11}" + "".join(f"{key} {mean[key]:6.1f}   " for key in SHOWN))
    print(f"  all processes together (sum of PSS): {total:.1f} MB")


def listening(pids: list[int], count: int, seconds: float = 60.0) -> list[int]:
    """The supervisor's workers once ``count`` of them are up."""
    deadline = time.monotonic() + seconds
    while True:
        found = [pid for pid in pids for pid in children(pid)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of load")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after start")
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout to run")
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = str(args.root.resolve())  # for parley serve and the CLI
    work = Path(tempfile.mkdtemp(prefix="parley-worker-memory-"))
    upstream_port, port = free_ports(2)
    with Services(work) as services:
        fake = ["-m", "bench.upstream", "--port", str(upstream_port)]
        upstream = services.start("upstream", upstream_port, fake)
        limits = "{backend: memory, per_worker: true}"
        config = write_parley_config(work, port, upstream_port, limits)
        key = create_key(config)
        command = ["-m", "parley", "serve", "--config", str(config), "--port", str(port)]
        command += ["--workers", str(args.workers)]
        server = services.start("parley", port, command, cwd=work)
        wait_until_ready(upstream)
        wait_until_ready(server, "/health", seconds=120)
        workers = listening([server.pid], args.workers) if args.workers > 1 else [server.pid]
        time.sleep(args.settle)
        print(f"parley serve --workers {args.workers} ({args.root}), MB")
        report("idle", server.pid, workers)
        load = argparse.Namespace(client="raw", concurrency=64, duration=args.duration, warmup=1.0)
        row = drive(load, "parley", "plain", port=port, key=key, watch={}, cpus=None)
        print(f"load: {row['rps']:,.0f} calls/s for {args.duration:g} s")
        report("after the load", server.pid, workers)


if __name__ == "__main__":
    main()
