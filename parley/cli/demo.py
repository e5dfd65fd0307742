"""``parley serve --demo``: the offline demo (``parley.demo``), run by the serve command."""

from __future__ import annotations

from pathlib import Path

from parley.cli.context import with_store
from parley.cli.serve import run_worker
from parley.demo.run import run_demo
from parley.telemetry.logs import configure_logging

DEMO_DIR = Path("parley-demo")


def serve_demo(host: str | None, port: int | None) -> None:
    """Start the local engines and serve Parley in front of them (the ``local`` extra)."""
    configure_logging()
    run_demo(
        DEMO_DIR.resolve(),
        host or "127.0.0.1",
        port or 8080,
        lambda raw: run_worker(raw, reuse_port=False),
        with_store,
    )
