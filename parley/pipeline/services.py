"""Services: everything a request needs, built once at start-up and passed down.

The HTTP app, the CLI and the tests all build the same ``Services`` from ``Settings``;
nothing lives in module globals. ``Services.close`` stops the background work in order:
stop refreshing, finish background settlements, write every queued usage record, close
the upstream HTTP client, the limiter and the store; all of it within
``server.shutdown_close_seconds``, whatever the database does (the records it has not
taken by then are spilled, and a connection that does not close is left to the exit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from parley.audio.budget import DecodeBudget
from parley.audio.pool import ProbePool
from parley.credentials import CredentialBox, SealError
from parley.domain.models import ModelRegistry
from parley.http import HeadLimits, HttpClient
from parley.limits.base import Limiter
from parley.limits.factory import build_limiter
from parley.pipeline.call import RequestIds
from parley.pipeline.meter import BackgroundTasks, Meter
from parley.pipeline.plan import Planner
from parley.pipeline.route import Route, Router
from parley.pipeline.trace import NO_TRACER, Tracer
from parley.pipeline.watch import CallWatchers
from parley.providers.base import ReplyBounds
from parley.providers.registry import (
    ProviderRegistry,
    check_channel_types,
    check_image_channels,
    check_native_responses,
)
from parley.runtime.alerts import Alerts, AlertWatch
from parley.runtime.body_pool import BodyPool
from parley.runtime.breaker import Breakers
from parley.runtime.budget import SpendLedger
from parley.runtime.channel_book import ChannelBook
from parley.runtime.client_secrets import ClientSecrets
from parley.runtime.content_log import ContentLog
from parley.runtime.directory import Directory
from parley.runtime.file_bytes import FileBytes, file_bytes
from parley.runtime.health_checks import HealthChecks
from parley.runtime.image_files import ImageFiles, default_directory
from parley.runtime.in_flight import CallsInFlight
from parley.runtime.live_sessions import LiveSessions
from parley.runtime.model_book import ModelBook
from parley.runtime.model_specs import model_specs
from parley.runtime.response_book import ResponseBook
from parley.runtime.writer import UsageWriter
from parley.settings import (
    ConfigError,
    ModelKind,
    Settings,
)
from parley.store.base import Store, StoreFault, StoreUnavailable
from parley.store.opening import open_store
from parley.store.plain import sqlite_file
from parley.voices.book import CloneBook
from parley.voices.deletions import CloneDeletions, DeletionTiming, Located
from parley.voices.rosters import Rosters

if TYPE_CHECKING:
    from parley.runtime.shared_breakers import SharedBreakers

log = logging.getLogger("parley")
SETTLEMENT_SECONDS = 5.0
"""The longest ``close`` waits for the limiter settlements still running (at most a
quarter of the closing time: the usage records come first)."""
CLOSING_SECONDS = 1.0
"""Of the closing time, what the usage writer leaves for closing connections (at most a
quarter of it)."""


def probe_pool(settings: Settings) -> ProbePool:
    """The audio threads, with the decode budget of the ``audio`` settings."""
    audio = settings.audio
    budget = DecodeBudget(
        audio.max_seconds, audio.decode_cpu_seconds, audio.decode_cpu_seconds_per_hour
    )
    return ProbePool(audio.threads, audio.threads_per_group, budget)


def image_files(settings: Settings) -> ImageFiles:
    """Where images served by URL are kept, for how long, within what (``images``)."""
    options = settings.images
    directory = options.url_dir or default_directory(settings.database.url)
    return ImageFiles(directory, options.url_ttl_seconds, options.url_max_bytes)


@dataclass
class Services:
    settings: Settings
    store: Store
    limiter: Limiter
    models: ModelRegistry
    router: Router
    providers: ProviderRegistry
    directory: Directory
    meter: Meter
    http: HttpClient
    tasks: BackgroundTasks
    clones: CloneBook
    rosters: Rosters[Route]
    probes: ProbePool
    """The threads that measure uploaded audio, shared fairly between groups."""
    bodies: BodyPool
    """The processes that read large request bodies, shared fairly between groups."""
    breakers: Breakers
    planner: Planner
    channels: ChannelBook
    """The channels routed to: the config file's and those managed live."""
    model_book: ModelBook
    """The models managed live, and the channels that serve them."""
    responses: ResponseBook
    """Stored responses of the Responses API, written behind the reply."""
    image_files: ImageFiles
    """The images served by URL (``response_format: url``), on disk for a while."""
    file_bytes: FileBytes
    """Where uploaded files' bytes are kept (a folder, or the database's chunks)."""
    client_secrets: ClientSecrets
    """The realtime client secrets (``ek_``) made here or found in the store."""
    contents: ContentLog
    """Calls' content kept as each group's policy says, written behind the reply."""
    started_at: int = field(default_factory=lambda: int(time.time()))
    request_ids: RequestIds = field(default_factory=RequestIds)
    watchers: CallWatchers = field(default_factory=CallWatchers)
    tracer: Tracer = NO_TRACER
    """Traces each call when an OTLP endpoint is set (``telemetry/wiring.py``)."""
    live_sessions: LiveSessions = field(default_factory=LiveSessions)
    """The realtime sessions open in this process, per model (``/metrics``)."""
    in_flight: CallsInFlight = field(default_factory=CallsInFlight)
    """The streams being relayed; shutdown ends them with ``streams.end_all()``."""
    shared_breakers: SharedBreakers | None = None
    """The breakers' link to the other workers and instances, when Redis is configured."""
    alerts: Alerts | None = None
    """Alerts raised here, audited and posted to ``alerts.webhooks`` from the background."""
    health_checks: HealthChecks | None = None
    """The scheduled health checks of the channels that ask for them (``health``)."""
    deletions: CloneDeletions | None = None
    """Deleted clones' engine copies still to delete, retried in the background."""
    close_by: float | None = None
    """When ``close`` must be done, on the event loop's clock: set by ``serve`` when the
    shutdown grace ends; otherwise ``server.shutdown_close_seconds`` from its start."""
    _loops: list[asyncio.Task[None]] = field(default_factory=list)
    _pruning: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    async def start(cls, settings: Settings, *, store: Store | None = None) -> Services:
        """Raises ``ConfigError`` for a channel type no adapter serves, or a Vertex AI
        channel whose service-account key cannot be loaded."""
        # One client serves every group. It keeps no cookies: a cookie one upstream reply
        # sets must never ride along on another group's call.
        upstream = settings.upstream
        http = HttpClient(
            max_per_origin=upstream.max_connections_per_origin,
            head_limits=HeadLimits(upstream.max_head_bytes, upstream.max_headers),
        )
        bounds = ReplyBounds(upstream.max_reply_bytes, upstream.max_event_bytes)
        providers = ProviderRegistry.default(
            http, bounds, settings.limits.default_max_tokens, settings.channels
        )
        check_channel_types(settings.channels, providers.types())
        check_native_responses(settings.channels, providers)
        check_image_channels(settings.channels, settings.models, providers)
        if store is None:
            opened = await open_store(
                settings.database.url,
                pool_size=settings.database.pool_size,
                timeout_seconds=settings.database.timeout_seconds,
                usage_socket=settings.usage.host_socket,
            )
            await opened.migrate(apart=True)  # Alembic never loads in a serving process
            store = opened
        limiter = build_limiter(settings.limits, settings.redis)
        directory = Directory(
            store,
            refresh_seconds=settings.limits.cache_refresh_seconds,
            unknown_lookups_per_second=settings.limits.unknown_key_lookups_per_second,
        )
        await directory.load()
        ledger = SpendLedger(store, settings.limits.budget_period)
        await ledger.refresh()
        writer = UsageWriter(store, ledger, settings.usage)
        await writer.start()
        tasks = BackgroundTasks()
        started_at = int(time.time())
        clones = CloneBook(store)
        await clones.load()
        book, model_book = await _books(settings, store, providers.types())
        models = ModelRegistry(model_specs(settings, started_at), settings.capabilities)
        models.use_live(model_book.live)
        routed = model_book.serve(book.active)
        router = Router(routed, random.Random())
        breakers = Breakers(routed)
        breakers.transitions.append(book.transition)
        services = cls(
            settings=settings,
            store=store,
            limiter=limiter,
            models=models,
            router=router,
            providers=providers,
            directory=directory,
            meter=Meter(writer, ledger, limiter, tasks),
            http=http,
            tasks=tasks,
            clones=clones,
            rosters=Rosters(providers),
            probes=probe_pool(settings),
            bodies=BodyPool(
                settings.server.body_processes, settings.server.body_processes_per_group
            ),
            breakers=breakers,
            planner=Planner(router, breakers, models, settings.models, settings.routing),
            channels=book,
            model_book=model_book,
            responses=ResponseBook(store, settings.responses, settings.usage.spill_dir),
            image_files=image_files(settings),
            file_bytes=_file_bytes(settings, store),
            client_secrets=ClientSecrets(store),
            contents=ContentLog(store, book.box, settings.content),
            started_at=started_at,
        )
        services.contents.start()
        await services.responses.replay_spills()
        services.responses.start()
        services._loops = [
            asyncio.create_task(services._refresh_loop(), name="parley-refresh"),
            asyncio.create_task(services._prune_loop(), name="parley-prune"),
            asyncio.create_task(services._prune_responses_loop(), name="parley-prune-responses"),
            asyncio.create_task(services._prune_files_loop(), name="parley-prune-files"),
        ]
        if settings.redis is not None:
            # Imported only with Redis: the Redis client is memory a gateway without it
            # need not carry (as ``parley.limits.factory``).
            from parley.runtime.shared_breakers import SharedBreakers

            shared = services.shared_breakers = SharedBreakers.connect(breakers, settings.redis)
            services._loops.append(asyncio.create_task(shared.run(), name="parley-breakers"))
        checks = services.health_checks = HealthChecks(
            book,
            breakers,
            providers,
            services.kind_of,
            store,
            changed=services.reload_channels,
            lease=services.shared_breakers.check_lease if services.shared_breakers else None,
        )
        services._loops.append(asyncio.create_task(checks.run(), name="parley-health-checks"))
        services._start_deletions()
        shared_ = services.shared_breakers
        alerts = services.alerts = Alerts(
            settings.alerts, store, claim=shared_.alert_claim if shared_ else None
        )
        breakers.transitions.append(alerts.breaker_moved)
        watch = AlertWatch(
            alerts,
            settings.alerts,
            directory=directory,
            ledger=ledger,
            writer=writer,
            queue_size=settings.usage.queue_size,
            refusals=lambda: services.meter.refusals,
            checks=checks,
        )
        services._loops.append(asyncio.create_task(alerts.run(), name="parley-alerts"))
        services._loops.append(asyncio.create_task(watch.run(), name="parley-alert-watch"))
        return services

    def model_names(self) -> list[str]:
        """Every model's name: the config file's in its order, then those managed live."""
        names = [model.name for model in self.settings.models]
        return names + [live.spec.name for live in self.model_book.live]

    def _start_deletions(self) -> None:
        """The background loop that deletes retired clones on their engines."""
        audio = self.settings.audio
        timing = DeletionTiming(
            audio.clone_deletion_retry_seconds,
            audio.clone_deletion_retry_max_seconds,
            audio.clone_deletion_scan_seconds,
        )
        deletions = CloneDeletions(self.store, self.providers, self.locate_channel, timing)
        self.deletions = deletions
        self._loops.append(asyncio.create_task(deletions.run(), name="parley-deletions"))

    def locate_channel(self, model: str, channel: str) -> Located | None:
        """Where ``channel`` serves ``model`` now (``None``: removed or disabled)."""
        for route in self.router.routes(model):
            if route.target.channel == channel:
                return Located(route.provider_type, route.target)
        return None

    def kind_of(self, model: str) -> ModelKind:
        """The kind of a configured model (``chat`` for a name no longer configured)."""
        resolved = self.models.resolve(model)
        kind: ModelKind = resolved.spec.kind if resolved is not None else "chat"  # type: ignore[assignment]
        return kind

    async def close(self) -> None:
        """Stop, write the usage records (or spill them) and close, by ``close_by``."""
        clock = asyncio.get_running_loop().time
        deadline = self.close_by
        if deadline is None:
            deadline = clock() + self.settings.server.shutdown_close_seconds

        def left() -> float:
            return max(0.0, deadline - clock())

        await self._stop_loops(left() / 2)
        await self.tasks.drain(seconds=min(SETTLEMENT_SECONDS, left() / 4))
        await self.meter.writer.close(left() - min(CLOSING_SECONDS, left() / 4))
        await self.responses.close(min(CLOSING_SECONDS, left() / 4))
        await self.contents.close(min(CLOSING_SECONDS, left() / 4))
        self.probes.close()
        self.bodies.close()
        await self.http.close()
        await _within(self.limiter.close(), left(), "the limiter")
        if self.shared_breakers is not None:
            await _within(self.shared_breakers.close(), left(), "the shared breakers")
        await _within(self.store.close(), left(), "the database")
        self.file_bytes.close()

    async def _stop_loops(self, seconds: float) -> None:
        """Cancel the refresh and prune loops, waiting (up to ``seconds``) for a prune in
        progress: a DELETE cut midway keeps SQLite locked for the usage records."""
        held = False
        try:
            held = await asyncio.wait_for(self._pruning.acquire(), max(seconds, 0.001))
        except TimeoutError:
            log.warning("usage pruning did not finish within the shutdown's time; cancelled")
        for loop in self._loops:
            loop.cancel()
        if held:
            self._pruning.release()
        for loop in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop

    async def refresh(self) -> None:
        """Reload groups, changed keys, period spend, channels and models from the
        store, and write the channels' breaker transitions."""
        await self.directory.load()
        await self.meter.ledger.refresh()
        await self.clones.load()
        await self.reload_channels()
        await self.channels.flush(self.store)

    async def reload_channels(self) -> None:
        """Read the stored channels and models; when either changed, serve the models
        and route with a new ``Router``."""
        channels_changed = await self.channels.load(self.store)
        models_changed = await self.model_book.load(self.store)
        if models_changed:
            self.models.use_live(self.model_book.live)
            log.info("models changed: %d managed live", len(self.model_book.live))
        if channels_changed or models_changed:
            active = self.model_book.serve(self.channels.active)
            self.router = Router(active, random.Random())
            self.planner.use(self.router)
            self.breakers.update(active)
            log.info("channels changed: now routing to %d", len(active))

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.limits.cache_refresh_seconds)
            try:
                await self.refresh()
            except (StoreUnavailable, StoreFault) as error:
                log.warning("directory refresh failed (%s); serving from cache", error)

    async def _prune_loop(self) -> None:
        retention = timedelta(days=self.settings.usage.retention_days)
        while True:
            try:
                async with self._pruning:
                    pruned = await self.store.prune_usage(datetime.now(UTC) - retention)
                    await self.store.prune_channel_events(datetime.now(UTC) - retention)
            except (StoreUnavailable, StoreFault) as error:
                log.warning("usage pruning failed (%s); will try again", error)
            else:
                if pruned:
                    log.info("pruned %d usage records older than %s", pruned, retention)
            await asyncio.sleep(self.settings.usage.prune_every_seconds)

    async def _prune_responses_loop(self) -> None:
        while True:
            try:
                async with self._pruning:
                    pruned = await self.responses.prune()
            except (StoreUnavailable, StoreFault) as error:
                log.warning("pruning stored responses failed (%s); will try again", error)
            else:
                if pruned:
                    log.info("pruned %d expired stored responses", pruned)
            await asyncio.sleep(self.settings.responses.prune_every_seconds)

    async def _prune_files_loop(self) -> None:
        while True:
            try:
                pruned = await self.prune_files()
            except (StoreUnavailable, StoreFault) as error:
                log.warning("pruning expired files failed (%s); will try again", error)
            else:
                if pruned:
                    log.info("pruned %d expired files", pruned)
            await asyncio.sleep(self.settings.files.prune_every_seconds)

    async def prune_files(self, most: int = 1000) -> int:
        """Delete expired files: their metadata first (no caller finds them from then
        on), then their bytes."""
        expired = await self.store.expired_files(most)
        await self.store.forget_files(expired)
        for file_id in expired:
            await self.file_bytes.delete(file_id)
        return len(expired)


async def _books(
    settings: Settings, store: Store, types: frozenset[str]
) -> tuple[ChannelBook, ModelBook]:
    """The channels and the models managed live, loaded from the store."""
    try:
        box = CredentialBox(settings.admin.secret_keys)
        book = ChannelBook(settings.channels, box, types)
    except SealError as error:
        raise ConfigError(f"admin.secret_keys: {error}") from None
    await book.load(store)
    model_book = ModelBook(settings.models)
    await model_book.load(store)
    return book, model_book


def _file_bytes(settings: Settings, store: Store) -> FileBytes:
    url = settings.database.url
    files = settings.files
    dialect = "postgresql" if url.startswith("postgres") else "sqlite"
    return file_bytes(dialect, sqlite_file(url), files.folder, store, files.chunk_bytes)


async def _within(closing: Awaitable[None], seconds: float, what: str) -> None:
    """Wait up to ``seconds`` for ``closing``; past that, leave it (the exit closes the
    sockets) rather than hold the shutdown on a server that does not answer."""
    task = asyncio.ensure_future(closing)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if done:
        task.result()
        return
    task.cancel()
    log.warning("closing %s did not finish within the shutdown's time; leaving it", what)
