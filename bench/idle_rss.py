"""A worker's idle RSS: what one worker holds after starting and serving a few calls.

Migrates a fresh SQLite file (or uses ``--database``, already migrated), then ``--runs``
times starts a fresh interpreter that builds the app as ``parley serve`` does, serves
``/health``, ``/v1/models`` and a refused chat call five times each, waits a second and
prints its ``VmRSS`` and which of the heavy optional modules it loaded (a worker on SQLite
should load none: tests/unit/test_lean_worker.py pins that).

    python -m bench.idle_rss
    python -m bench.idle_rss --runs 5
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

from parley.store.sql import open_store

REPO = Path(__file__).resolve().parents[1]
WATCHED = (
    "sqlalchemy",
    "sqlalchemy.orm",
    "sqlalchemy.ext.asyncio",
    "aiosqlite",
    "greenlet",
    "asyncpg",
    "av",
)
WORKER = """
import asyncio, sys
import aiohttp
from aiohttp import web
import parley.cli.serve
from parley.app import create_app
from parley.settings import Settings

def rss_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024

async def main(database):
    runner = web.AppRunner(create_app(Settings.model_validate({"database": {"url": database}})))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    headers = {"Authorization": "Bearer pk-" + "x" * 43}
    async with aiohttp.ClientSession(headers=headers) as http:
        for _ in range(5):
            for path in ("/health", "/v1/models", "/v1/chat/completions"):
                async with http.get(f"http://127.0.0.1:{port}{path}") as reply:
                    await reply.read()
    await asyncio.sleep(1)
    print(f"{rss_mb():.1f}", *(name for name in sys.argv[2:] if name in sys.modules))
    await runner.cleanup()

asyncio.run(main(sys.argv[1]))
"""


async def migrate(database: str) -> None:
    store = await open_store(database)
    try:
        await store.migrate()
    finally:
        await store.close()


def measure(database: str) -> tuple[float, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, database, *WATCHED],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    rss, *loaded = done.stdout.split()
    return float(rss), loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--database", help="an already migrated database URL")
    args = parser.parse_args()
    print(f"watched: {', '.join(WATCHED)}")
    with tempfile.TemporaryDirectory() as folder:
        database = args.database or f"sqlite:///{Path(folder) / 'parley.db'}"
        if args.database is None:
            asyncio.run(migrate(database))
        for run in range(1, args.runs + 1):
            rss, loaded = measure(database)
            print(f"run {run}: idle RSS {rss:.1f} MB; loaded: {', '.join(loaded) or 'none'}")


if __name__ == "__main__":
    main()
