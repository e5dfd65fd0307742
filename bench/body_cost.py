"""The CPU one large Responses body costs its caller: the body process's work, called here.

Builds the body ``bench.big_body`` sends (``--mib`` MiB of same-role items of ``--text``
characters) and reads it as a body process does (``uncollected(read_apart, ...)``), in
this process: no server, no upstream. Prints the CPU and wall seconds and the load
average; with ``--profile`` the same call under cProfile, its costliest functions.

    python -m bench.body_cost                    # from the repo root
    python -m bench.body_cost --profile 20       # the 20 costliest functions

Figures, not a test.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

from bench.big_body import big_body
from parley.api.responses_apart import read_apart
from parley.runtime.body_pool import uncollected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=24.9, help="the body's size")
    parser.add_argument("--text", type=int, default=11, help="characters in each item")
    parser.add_argument("--profile", type=int, default=0, help="print N costliest functions")
    args = parser.parse_args()
    raw = big_body("responses", args.mib, args.text)
    cpu, wall = time.process_time(), time.monotonic()
    uncollected(read_apart, (raw, 1))
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    load = ", ".join(f"{each:.1f}" for each in os.getloadavg())
    print(f"{len(raw):,} bytes: {cpu:.2f} s CPU, {wall:.2f} s wall (load average {load})")
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(uncollected, read_apart, (raw, 1))
        pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
