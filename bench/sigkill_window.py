"""How much usage a SIGKILL loses: the calls answered in the last moments before it.

Usage records are written by a background writer at least every ``usage.flush_seconds``
(1 s by default). A SIGKILL leaves no chance to write the queue, so the calls answered
since the last flush are served but never recorded. This measures that window: a real
``parley serve`` (SQLite, default flush interval) under a closed loop of concurrent chat
calls is killed with SIGKILL at a random moment; the records found afterwards are
compared with the calls that got a 200, and the window is the time from the earliest
unrecorded reply to the kill.

    python -m bench.sigkill_window                 # 5 rounds
    python -m bench.sigkill_window --rounds 10 --concurrency 8

Figures, not a test. It uses the process helpers of ``tests/process`` (fake engine,
``parley serve``, the CLI) and removes its temporary folder at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from tests.process.calls import MODEL, gateway_config
from tests.process.procs import Processes, Server, usage_count


async def load_then_kill(
    server: Server, key: str, concurrency: int, seconds: float
) -> tuple[list[float], float]:
    """Calls until ``seconds`` have passed, then SIGKILL; the times of the 200 replies,
    and of the kill."""
    answered: list[float] = []
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}]}
    headers = {"Authorization": f"Bearer {key}"}
    deadline = time.monotonic() + seconds

    async def client(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < deadline:
            async with session.post(
                f"{server.v1}/chat/completions", json=body, headers=headers
            ) as reply:
                await reply.read()
                if reply.status == 200 and time.monotonic() < deadline:
                    answered.append(time.monotonic())

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
        os.killpg(server.pid, signal.SIGKILL)
        return answered, time.monotonic()


def one_round(workdir: Path, concurrency: int, rng: random.Random) -> tuple[int, int, float]:
    """(calls answered, records lost, window in seconds) for one kill."""
    procs = Processes(workdir)
    try:
        engine = procs.engine()
        database = f"sqlite:///{workdir / 'parley.db'}"
        config = gateway_config(
            engine, workdir, database_url=database, usage={"flush_seconds": 1.0}
        )
        server = procs.serve(config, wait=False)
        key = server.create_key("team", "--rpm", "100000000", "--tpm", "1000000000")
        server.wait_ready()
        seconds = rng.uniform(3.0, 5.0)
        answered, killed_at = asyncio.run(load_then_kill(server, key, concurrency, seconds))
        server.process.wait(timeout=10)
        recorded = usage_count(database)
        lost = len(answered) - recorded
        window = killed_at - sorted(answered)[recorded] if lost > 0 else 0.0
        return len(answered), lost, window
    finally:
        procs.stop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    windows = []
    for number in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory(prefix="parley-sigkill-") as folder:
            answered, lost, window = one_round(Path(folder), args.concurrency, rng)
        windows.append(window)
        print(
            f"round {number}: {answered} calls answered, {lost} not recorded, "
            f"the last {window:.2f} s before the kill"
        )
    print(
        f"window: mean {statistics.mean(windows):.2f} s, max {max(windows):.2f} s "
        f"(usage.flush_seconds 1.0, {args.rounds} rounds)"
    )


if __name__ == "__main__":
    main()
