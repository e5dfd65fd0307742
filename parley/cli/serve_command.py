"""``parley serve``: check everything that can be checked, say where it serves, then serve.

A bad configuration, an unset variable, an unknown channel type, a port already taken or
a database that cannot be opened stops here with one line, before the web stack is even
imported (``parley/cli/serve.py``), so the failure is quick on a loaded machine too.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from parley.cli.context import database_shown, fail, settings_from, with_store
from parley.cli.listen import CannotListen, check_listen
from parley.cli.startup_checks import unserved_capabilities
from parley.heap import (
    ALLOCATORS,
    Allocator,
    AllocatorMissing,
    running_allocator,
    serve_allocator,
)
from parley.settings import ConfigError, Settings
from parley.telemetry.logs import configure_logging
from parley.telemetry.workers import shared_metrics

if TYPE_CHECKING:
    from parley.store.base import Store

log = logging.getLogger("parley")
NO_CHANNELS_HINT = (
    "no channels are configured, so no model can be served yet. Add `channels:` and "
    "`models:` to parley.yaml (every field is shown in parley.example.yaml), then create a "
    "group and a key: `parley groups create team` and `parley keys create --group team`."
)


@click.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file.")
@click.option("--host", help="Address to listen on (default from config, 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default from config, 8080).")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--demo",
    is_flag=True,
    help="Offline demo: start local engines (chat, speech, transcription) and serve them; "
    "needs pip install 'parley[local]'.",
)
@click.option(
    "--allocator",
    type=click.Choice(ALLOCATORS),
    default="auto",
    show_default=True,
    help="Memory allocator of the serving processes. auto: jemalloc (preloaded; Debian's "
    "libjemalloc2) where installed, which gives a burst's memory back, else CPython's "
    "pymalloc, which keeps a burst's arenas. malloc (glibc) and mimalloc (libmimalloc2.0) "
    "also give it back. PYTHONMALLOC, if set, wins.",
)
@click.pass_context
def serve(
    ctx: click.Context,
    config_path: str | None,
    host: str | None,
    port: int | None,
    workers: int,
    demo: bool,
    allocator: Allocator,
) -> None:
    """Serve the /v1 API."""
    try:
        again = serve_allocator(allocator, os.environ, sys.orig_argv)
    except AllocatorMissing as error:
        fail(str(error))
    if again is not None:  # the interpreter reads PYTHONMALLOC only at start (parley/heap.py)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(*again)
    if demo:
        from parley.cli.demo import serve_demo  # the engines' launcher, only when asked

        serve_demo(host, port)
        return
    settings = _with_address(settings_from(ctx, config_path, secrets=True), host, port)
    configure_logging(settings.server.log_format)
    _check(settings, workers)

    async def migrate(store: Store) -> None:
        return None

    with_store(settings, migrate, announce=False)  # migrated apart: Alembic stays out
    _announce(settings, workers)
    if workers == 1:
        from parley.cli.serve import run_worker  # the web stack, now it is needed

        run_worker(settings.model_dump(mode="json"), reuse_port=False)
    else:
        from parley.cli.supervisor import run_workers  # the workers import the web stack

        with shared_metrics(settings) as shared:
            run_workers(shared, workers)


def _check(settings: Settings, workers: int) -> None:
    """What the configuration's validation cannot know: adapters, workers, the address."""
    from parley.http import HttpClient
    from parley.providers.registry import (
        ProviderRegistry,
        check_channel_types,
        check_image_channels,
        check_native_responses,
    )

    try:
        registry = ProviderRegistry.default(HttpClient())
        check_channel_types(settings.channels, registry.types())
        check_native_responses(settings.channels, registry)
        check_image_channels(settings.channels, settings.models, registry)
    except ConfigError as error:
        fail(str(error))
    if workers > 1 and settings.limits.backend == "memory" and not settings.limits.per_worker:
        fail(
            f"--workers {workers} with the memory limiter would give each worker its own "
            "limits (N workers, N times the quota). Use `limits: {backend: redis}`, or set "
            "`limits: {per_worker: true}` to accept per-worker counting."
        )
    try:
        check_listen(settings.server.host, settings.server.port, reuse_port=workers > 1)
    except CannotListen as error:
        fail(str(error), 1)


def _announce(settings: Settings, workers: int) -> None:
    if not settings.channels:
        log.warning(NO_CHANNELS_HINT)
    for warning in unserved_capabilities(settings):
        log.warning(warning)
    log.info(
        "parley serving on http://%s:%d/v1 (database %s, limiter %s, %d worker%s, allocator %s)",
        settings.server.host,
        settings.server.port,
        database_shown(settings.database.url),
        settings.limits.backend,
        workers,
        "s" if workers > 1 else "",
        running_allocator(os.environ),
    )


def _with_address(settings: Settings, host: str | None, port: int | None) -> Settings:
    update: dict[str, Any] = {}
    if host is not None:
        update["host"] = host
    if port is not None:
        update["port"] = port
    if not update:
        return settings
    return settings.model_copy(update={"server": settings.server.model_copy(update=update)})
