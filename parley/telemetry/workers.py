"""Metrics across ``serve --workers N``: one directory where every worker's values meet.

prometheus-client's multiprocess mode is chosen by ``PROMETHEUS_MULTIPROC_DIR`` in the
environment before the library is imported, so the parent sets it for the workers it
spawns, and hands the folder to them in the settings (``metrics.multiprocess_dir``) so a
scrape answered by any worker adds up all of them. The folder lives as long as the
workers, and is removed when they have stopped.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from parley.settings import Settings

MULTIPROCESS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


@contextmanager
def shared_metrics(settings: Settings) -> Iterator[Settings]:
    """The settings the workers get: metrics in a fresh shared folder (if metrics are on)."""
    if not settings.metrics.enabled:
        yield settings
        return
    folder = tempfile.mkdtemp(prefix="parley-metrics-")
    os.environ[MULTIPROCESS_VARIABLE] = folder  # inherited by the spawned workers
    metrics = settings.metrics.model_copy(update={"multiprocess_dir": folder})
    try:
        yield settings.model_copy(update={"metrics": metrics})
    finally:
        os.environ.pop(MULTIPROCESS_VARIABLE, None)
        shutil.rmtree(folder, ignore_errors=True)
