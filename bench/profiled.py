"""Run a Python program with cProfile switched on and off by signals: what
``bench.count_calls --tool cprofile`` runs the server under.

    python bench/profiled.py OUT -m parley serve --config parley.yaml

``SIGUSR1`` starts profiling the main thread (the event loop's), ``SIGUSR2`` stops it and
writes the statistics to ``OUT`` (read them with ``python -m pstats OUT``). Function
call counts divided by the calls sent are what one call runs; the times are cProfile's,
inflated by its own cost per Python call, so read them only against each other.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
from types import FrameType


def main() -> None:
    out, flag, target, *rest = sys.argv[1:]
    profile = cProfile.Profile()

    def start(signum: int, frame: FrameType | None) -> None:
        profile.enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [target, *rest]
    if flag == "-m":
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(target, run_name="__main__")


if __name__ == "__main__":
    main()
