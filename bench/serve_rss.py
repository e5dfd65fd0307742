"""The RSS of ``parley serve`` started on a fresh SQLite file, as in the README's quick start.

Each run starts ``python -m parley serve`` (one worker) in a new empty folder, so it
creates and migrates ``./parley.db``; waits for ``/health`` to answer, then ``--settle``
seconds more, and prints the process's ``VmRSS``; then stops it with SIGTERM.
``--root`` runs another checkout's Parley (its folder goes first on ``PYTHONPATH``).

    python -m bench.serve_rss
    python -m bench.serve_rss --runs 3 --root /path/to/other/checkout
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def measure(root: Path, settle: float) -> float:
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="parley-serve-rss-") as folder:
        env = {**os.environ, "PYTHONPATH": str(root)}
        server = subprocess.Popen(
            [sys.executable, "-m", "parley", "serve", "--port", str(port)],
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                        break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("parley serve did not answer /health") from None
                    time.sleep(0.1)
            time.sleep(settle)
            return _rss_mb(server.pid)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds after /health")
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout to run")
    args = parser.parse_args()
    figures = [measure(args.root.resolve(), args.settle) for _ in range(args.runs)]
    print(" ".join(f"{rss:.1f}" for rss in figures), "MB")


if __name__ == "__main__":
    main()
