"""How the gateway runs, as configured: the server, its database and Redis, limits, usage
and stored responses, the admin surface, metrics, the bounds on upstreams and audio, and
routing.

Part of the typed settings, as ``catalog_settings`` is for what the gateway serves:
each section is a class with its defaults and its own checks, and nothing here reads a
file or the environment. ``parley.settings`` composes them into ``Settings``, checks
what spans sections, reads the file and the environment, and re-exports these classes.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from parley.catalog_settings import Strict

DEFAULT_DATABASE_URL = "sqlite:///./parley.db"
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""A reference to an environment variable in a config string: ``${NAME}``."""


class CorsSettings(Strict):
    """Browser access to ``/v1`` from other origins; off while ``allowed_origins`` is empty."""

    allowed_origins: tuple[str, ...] = ()
    """Exact origins (``https://app.example.com``), or ``"*"`` for any."""
    max_age_seconds: int = Field(600, ge=0)

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, origins: tuple[str, ...]) -> tuple[str, ...]:
        for origin in origins:
            if origin != "*" and not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ValueError(f"`{origin}` is not an origin like https://app.example.com")
        return tuple(origin.rstrip("/") for origin in origins)


class MetricsSettings(Strict):
    """Prometheus ``/metrics``."""

    enabled: bool = True
    token: str | None = None
    """When set, a scrape must carry ``Authorization: Bearer <token>``. Without one the
    series are open, and their labels name groups (tenants), models and channels."""
    multiprocess_dir: str | None = None
    """Set by ``serve --workers N`` (not in the file): where the workers' values meet."""


class OtlpSettings(Strict):
    """OpenTelemetry export over OTLP/HTTP (protobuf): GenAI traces, and optionally the
    GenAI client metrics. Off (nothing of OpenTelemetry imported) while ``endpoint`` is
    unset; needs the ``otel`` extra (``pip install 'parley[otel]'``) when set."""

    endpoint: str | None = None
    """The collector's base URL (``http://collector:4318``): spans go to ``/v1/traces``,
    metrics to ``/v1/metrics`` under it."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every export (a hosted collector's key, ``${NAME}`` from the environment)."""
    service_name: str = "parley"
    sample_ratio: float = Field(1.0, ge=0.0, le=1.0)
    """Of the calls without a sampled parent, the share traced; a caller's ``traceparent``
    decides for its own calls (parent-based sampling)."""
    metrics: bool = False
    """Also export ``gen_ai.client.*`` metrics over OTLP (``/metrics`` stays)."""
    metrics_interval_seconds: float = Field(60.0, gt=0)
    max_queue_size: int = Field(2048, gt=0)
    """Ended spans waiting for export; past it a span is dropped (and counted)."""
    max_export_batch_size: int = Field(512, gt=0)
    schedule_delay_seconds: float = Field(5.0, gt=0)
    """How long an ended span may wait before its batch leaves."""
    timeout_seconds: float = Field(10.0, gt=0)
    """One export's time, in the exporter's thread; a batch that fails is dropped."""

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, endpoint: str | None) -> str | None:
        if endpoint is None:
            return None
        if not re.fullmatch(r"https?://[^/\s]+(/\S*)?", endpoint):
            raise ValueError(f"`{endpoint}` is not an http:// or https:// URL")
        return endpoint.rstrip("/")


class TelemetrySettings(Strict):
    otlp: OtlpSettings = OtlpSettings()


class ServerSettings(Strict):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    max_body_bytes: int = Field(26_214_400, gt=0, description="largest request body accepted")
    max_image_bytes: int = Field(5_242_880, gt=0, description="largest data-URL image accepted")
    max_audio_bytes: int = Field(26_214_400, gt=0, description="largest audio upload accepted")
    shutdown_grace_seconds: float = Field(10.0, ge=0)
    shutdown_close_seconds: float = Field(
        5.0,
        gt=0,
        description="after the calls, time to write usage records and close before spilling",
    )
    access_log: bool = False
    log_format: Literal["text", "json"] = "text"
    cors: CorsSettings = CorsSettings()
    body_timeout_seconds: float = Field(
        120.0, gt=0, description="time a request body may take to arrive whole (else 408)"
    )
    pending_bodies_per_key: int = Field(
        16, gt=0, description="requests of one key whose bodies may be arriving at once"
    )
    large_body_bytes: int = Field(
        1_048_576, gt=0, description="a larger body is read in a body process, off the event loop"
    )
    body_processes: int = Field(2, gt=0, description="processes that read large bodies")
    body_processes_per_group: int = Field(
        1, gt=0, description="body processes one group's large bodies may hold at once"
    )
    keepalive_seconds: float = Field(
        75.0, gt=0, description="an idle connection, or a request head not yet whole, closes"
    )
    backlog: int = Field(
        16384, gt=0, description="connections the kernel queues before accept (capped by somaxconn)"
    )


class DatabaseSettings(Strict):
    url: str = DEFAULT_DATABASE_URL
    pool_size: int = Field(5, gt=0)
    timeout_seconds: float = Field(10.0, gt=0)
    """Bounds a connect and a statement (PostgreSQL), and the wait for a pooled connection."""

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if not url.startswith(("sqlite", "postgresql", "postgres")):
            raise ValueError("must start with sqlite:// or postgresql://")
        return url


class RedisSettings(Strict):
    url: str = "redis://127.0.0.1:6379/0"
    """``redis://``, ``rediss://`` (TLS) or ``unix://``, as ``parley.resp.Address`` reads
    it; checked when the settings are read, so a URL the client cannot use stops the
    start with the reason (never the URL: it may hold a password)."""
    on_failure: Literal["local", "reject"] = "local"
    retry_seconds: float = Field(5.0, gt=0)
    prefix: str = "parley"

    @field_validator("url")
    @classmethod
    def _usable_url(cls, url: str) -> str:
        from parley.resp import Address  # only with a redis section: see limits/factory.py

        Address.from_url(url)
        return url


class LimitSettings(Strict):
    backend: Literal["memory", "redis"] = "memory"
    per_worker: bool = False
    default_max_tokens: int = Field(1024, gt=0)
    cache_refresh_seconds: float = Field(2.0, gt=0)
    unknown_key_lookups_per_second: float = Field(20.0, gt=0)
    """Store look-ups of keys not in the directory, across the process (a wrong-key flood)."""
    budget_period: Literal["month", "day"] = "month"


class UsageSettings(Strict):
    retention_days: int = Field(30, ge=1)
    flush_seconds: float = Field(1.0, gt=0)
    queue_size: int = Field(10_000, gt=0)
    batch_size: int = Field(500, gt=0)
    prune_every_seconds: float = Field(3600.0, gt=0)
    spill_dir: str = "."
    """Where usage records and stored responses are kept if the database is unreachable at
    shutdown (replayed at start)."""
    host_writer: bool = True
    """With ``serve --workers N`` on a SQLite file, one process writes every worker's
    usage records (``store/usage_host.py``); False: each worker writes its own."""
    host_socket: str | None = None
    """Set by ``serve --workers N`` (not in the file): the host writer's socket."""


class ContentSettings(Strict):
    """How the calls' content a group's policy keeps is captured and written
    (``runtime/content_log.py``; the policy itself is each group's)."""

    max_bytes: int = Field(16_384, ge=256, le=1_048_576)
    """The most of a call's request body, and of its reply, that is kept (a stream's
    reply: its assembled text); the rest is cut, and the cut marked."""
    queue_size: int = Field(500, gt=0)
    """The most captured calls that may wait for the writer; past it a call's content is
    dropped (counted on ``/metrics``), never waited for."""
    batch_size: int = Field(100, gt=0)
    flush_seconds: float = Field(1.0, gt=0)
    purge_every_seconds: float = Field(3600.0, gt=0)
    """How often content past its group's retention is deleted."""


class ResponsesSettings(Strict):
    """Stored responses of the Responses API (``POST /v1/responses`` with ``store``)."""

    retention_days: float = Field(30, gt=0)
    """How long a stored response can be retrieved or continued; pruned after."""
    flush_seconds: float = Field(0.2, gt=0)
    """How often stored responses waiting in memory are written (in batches)."""
    queue_size: int = Field(2_000, gt=0)
    """The most responses that may wait to be written; past it, a call that would store
    one is refused (503) until they are written (``store: false`` calls are served)."""
    prune_every_seconds: float = Field(3600.0, gt=0)


class FileSettings(Strict):
    """Uploaded files (``/v1/files``): batch inputs, batch outputs and user data."""

    folder: str | None = None
    """Where a SQLite deployment keeps files' bytes; unset: ``<name>-files``
    beside the database (a temporary folder for a memory database). On PostgreSQL the
    bytes are kept in the database, in chunks, so every instance sees every file."""
    max_file_bytes: int = Field(200 * 1024 * 1024, gt=0)
    """The largest file a caller may upload (413 past it)."""
    max_group_bytes: int = Field(10 * 1024 * 1024 * 1024, gt=0)
    """The most bytes a group's files may hold together, batch outputs included (413 for
    an upload past it)."""
    chunk_bytes: int = Field(1024 * 1024, gt=0, le=64 * 1024 * 1024)
    """The size of each piece a file is written and read in (each a row on PostgreSQL)."""
    prune_every_seconds: float = Field(3600.0, gt=0)
    """How often expired files are deleted."""


class BatchSettings(Strict):
    """The batch lane (``/v1/batches``): Parley runs each line as a call of its own."""

    enabled: bool = True
    """Whether this instance runs batch lines (the API is served either way)."""
    concurrency: int = Field(8, gt=0)
    """The most lines in flight at once, across every batch."""
    per_channel: int = Field(2, gt=0)
    """The most lines in flight at once on one channel, so interactive calls keep the
    rest of it: the lane's share of the channel when its interactive calls are well."""
    adaptive: bool = True
    """Whether each channel's share shrinks (halves) when its interactive calls are
    answered 429 or slow down, and grows back by one line every ``grow_seconds``
    without; off: ``per_channel`` always."""
    grow_seconds: float = Field(5.0, gt=0)
    """How long a channel's share waits, without a 429 or a slowdown of its
    interactive calls, before it grows by one line."""
    slowdown: float = Field(0.25, gt=0)
    """How much slower than their best recent latency (a share: 0.25 is 25 % slower) a
    channel's interactive calls must get for its share to shrink."""
    backoff_seconds: float = Field(5.0, gt=0)
    """How long a model's lines wait after a 429 (the group's rates or the upstream's)
    or while none of its channels' breakers is closed."""
    rate_reserve: float = Field(0.25, ge=0, lt=1)
    """The share of a group's (and its key's) requests and tokens per minute the lane
    leaves to interactive calls: a batch's lines start only while more than this share
    of each is left."""
    max_lines: int = Field(50_000, gt=0)
    """The most lines one input file may hold."""
    poll_seconds: float = Field(1.0, gt=0)
    """How often the lane looks for work when it found none."""
    lease_seconds: float = Field(30.0, gt=0)
    """How long a lane's lease lasts unrenewed (it renews it every third of this): when
    an instance dies, the other instances' lanes take over its batch lines this long
    after its last renewal."""


MIN_ADMIN_TOKEN_CHARS = 16
"""The admin token opens every group, key and budget: a short one is refused at start."""


RoleName = Literal["viewer", "operator", "owner"]
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


class OidcSettings(Strict):
    """Single sign-on to the dashboard through an OpenID Connect provider (authorization
    code with PKCE; ``parley.admin.oidc``). The role comes from a claim of the ID token
    (or of userinfo) at every sign-in, through ``roles``: claim value → role."""

    issuer: str
    """The provider's issuer URL, exactly as its discovery document states it."""
    client_id: str = Field(min_length=1)
    client_secret: SecretStr | None = None
    """``${NAME}``: kept out of the file, never logged; unset: a public client (PKCE)."""
    name: str = Field("single sign-on", min_length=1, max_length=60)
    """What the button on the login page says: "Sign in with <name>"."""
    scopes: tuple[str, ...] = ("openid", "profile", "email")
    role_claim: str = "groups"
    """The claim that holds the caller's groups or roles; a dotted path reaches into
    objects (Keycloak's ``realm_access.roles``)."""
    roles: dict[str, RoleName] = Field(min_length=1)
    """Claim value → role; where several match, the highest role wins, and where none
    does the sign-in is refused."""
    username_claim: str = "preferred_username"
    """The claim that names the account (made lower-case; other characters than
    letters, digits, '.', '_' and '-' become '-')."""
    create_accounts: bool = False
    """Create the account at its first sign-in; off: only accounts an owner made for
    single sign-on (``"sso": true``) or that signed in before may sign in."""
    redirect_base_url: str
    """Parley's public address as the browser reaches it (``https://parley.example``);
    the provider sends the browser back to ``<it>/admin/sso/callback``."""

    @field_validator("issuer", "redirect_base_url")
    @classmethod
    def _https(cls, url: str) -> str:
        parsed = urlsplit(url)
        loopback = parsed.scheme == "http" and parsed.hostname in LOOPBACK_HOSTS
        if not parsed.hostname or (parsed.scheme != "https" and not loopback):
            raise ValueError("must be an https:// URL (http:// only on the loopback address)")
        return url

    @field_validator("scopes")
    @classmethod
    def _openid(cls, scopes: tuple[str, ...]) -> tuple[str, ...]:
        if "openid" not in scopes:
            raise ValueError("must include openid")
        return scopes

    @property
    def redirect_uri(self) -> str:
        return f"{self.redirect_base_url.rstrip('/')}/admin/sso/callback"


class AdminSettings(Strict):
    token: str | None = None
    """The bearer token of ``/admin`` and the dashboard's password; unset or empty: off."""

    oidc: OidcSettings | None = None
    """Single sign-on to the dashboard; unset: off."""
    local_sign_in: bool = True
    """Whether the admin token and the accounts' passwords sign in (the dashboard's form,
    the API's Bearer and Basic credentials); false leaves single sign-on alone, and
    ``PARLEY_ADMIN_LOCAL_SIGN_IN=true`` at a restart is the way back in (break-glass)."""

    secure_cookies: Literal["auto", "always"] = "auto"
    """``auto``: the dashboard's cookies are ``Secure`` when the request came over HTTPS,
    directly or through a trusted proxy that says so; ``always``: whatever the request."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or networks (``10.0.0.0/8``) whose ``X-Forwarded-Proto`` is believed."""
    secret_keys: tuple[str, ...] = ()
    """Keys that seal the credentials of channels added from the admin surface (Fernet
    keys, ``parley channels new-key``): the first seals, every one opens, so a key is
    rotated by putting a new one first and running ``parley channels reseal``. Usually
    ``PARLEY_SECRET_KEYS`` (comma-separated); unset: channels cannot be added live."""

    @field_validator("secret_keys", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("token")
    @classmethod
    def _long_enough(cls, token: str | None) -> str | None:
        # A ``${NAME}`` left as written (admin commands, which never use the token) passes.
        if token and len(token) < MIN_ADMIN_TOKEN_CHARS and not ENV_REF.fullmatch(token):
            raise ValueError(
                f"must be at least {MIN_ADMIN_TOKEN_CHARS} characters long (it opens the "
                "whole admin API); make one with: "
                "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        return token

    @model_validator(mode="after")
    def _someone_signs_in(self) -> AdminSettings:
        if not self.local_sign_in and self.oidc is None:
            raise ValueError(
                "local_sign_in is false but admin.oidc is not set: nobody could sign in"
            )
        return self

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, proxies: tuple[str, ...]) -> tuple[str, ...]:
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"`{proxy}` is not an address or network like 10.0.0.5 or 10.0.0.0/8"
                ) from None
        return proxies


class UpstreamSettings(Strict):
    """Bounds on what Parley accepts from any upstream (defaults no real model reaches)."""

    max_reply_bytes: int = Field(64 * 1024 * 1024, gt=0, description="largest whole reply")
    max_event_bytes: int = Field(8 * 1024 * 1024, gt=0, description="largest streamed event")
    max_connections_per_origin: int = Field(1000, gt=0)
    max_head_bytes: int = Field(
        64 * 1024, ge=1024, description="largest reply head (status line and header fields)"
    )
    max_headers: int = Field(100, gt=0, description="most header fields in one reply")


class AudioSettings(Strict):
    """Measuring uploaded audio: how long a clip may last, what decoding it may cost, and
    the threads it runs on (``parley.audio.pool``); and how deleted clones are deleted
    on their engines when a first attempt fails (``parley.voices.deletions``)."""

    max_seconds: float = Field(7200.0, gt=0, description="the longest clip accepted (else 400)")
    decode_cpu_seconds: float = Field(2.0, gt=0, description="CPU time any clip may take to decode")
    decode_cpu_seconds_per_hour: float = Field(
        20.0, ge=0, description="more CPU time for each hour of audio decoded"
    )
    threads: int = Field(4, gt=0, description="clips measured at once")
    threads_per_group: int = Field(1, gt=0, description="clips of one group measured at once")
    clone_deletion_retry_seconds: float = Field(
        30.0, gt=0, description="wait after a failed deletion of a clone on its engine"
    )
    """The wait after the first failed attempt; doubled after each further failure."""
    clone_deletion_retry_max_seconds: float = Field(
        3600.0, gt=0, description="longest wait between two attempts at deleting a clone"
    )
    clone_deletion_scan_seconds: float = Field(
        5.0, gt=0, description="how often each worker looks for clone deletions that are due"
    )


class ImageSettings(Strict):
    """Image endpoints: what an edit may upload, and the images Parley serves by URL
    (``runtime/image_files.py``; docs/api.md, Images)."""

    max_file_bytes: int = Field(
        20 * 1024 * 1024, gt=0, description="largest image or mask an edit may upload"
    )
    max_files: int = Field(16, gt=0, description="most images one edit may upload")
    url_ttl_seconds: int = Field(3600, gt=0, description="how long an image URL serves")
    url_dir: str | None = None
    """Where images served by URL are kept; unset: ``parley-images`` beside a SQLite
    database, else in the working directory."""
    url_max_bytes: int = Field(
        1024 * 1024 * 1024, gt=0, description="the most bytes kept for URLs (oldest go first)"
    )
    public_url: str | None = None
    """The gateway's address as callers reach it (``https://ai.example.com``), for URLs
    to images; unset: the address each request came to."""


class RoutingSettings(Strict):
    """How hard a call tries other channels and models before it fails."""

    max_attempts: int = Field(4, ge=1)
    """Upstream attempts one call may make, across channels and fallback models."""
    retry_ratio: float = Field(0.2, ge=0, le=1)
    """Across the process, retries (attempts after a call's first) may add at most this
    share of the calls of the last ``retry_window_seconds``."""
    min_retries: int = Field(10, ge=0)
    """Retries always allowed per window, so a quiet gateway still fails over."""
    retry_window_seconds: float = Field(10.0, gt=0)


class AlertWebhook(Strict):
    """Where alerts are posted, and how (docs/operations.md, Alerts)."""

    url: str
    secret: str | None = Field(None, repr=False, min_length=16)
    """Signs each body: ``X-Parley-Signature: sha256=<hex HMAC-SHA256 of the body>``."""
    format: Literal["slack", "json"] = "json"
    """``slack``: an incoming-webhook body (``{"text": ...}``); ``json``: the alert's fields."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")) or any(c in url for c in " \r\n\0"):
            raise ValueError("must be an http:// or https:// URL")
        return url


class AlertSettings(Strict):
    """What raises an alert and where it goes (docs/operations.md, Alerts)."""

    webhooks: tuple[AlertWebhook, ...] = ()
    budget_thresholds: tuple[float, ...] = (0.8, 1.0)
    """Shares of a group's or key's budget whose crossing raises an alert, once a period."""
    writer_backlog: float = Field(0.5, gt=0, le=1)
    """The share of ``usage.queue_size`` waiting to be written that raises an alert."""
    refusals_per_minute: float | None = Field(600.0, gt=0)
    """Refusals (rates, budgets, models not allowed) per minute that raise an alert."""
    check_seconds: float = Field(10.0, ge=0.01)
    """How often budgets, the usage writer, refusals and channels are looked at."""
    attempts: int = Field(6, ge=1, le=20)
    """Deliveries tried per alert and webhook before it is given up (and logged)."""
    backoff_seconds: float = Field(1.0, gt=0)
    """The wait after a first failed delivery, doubled after each, up to ``max_backoff``."""
    max_backoff_seconds: float = Field(300.0, gt=0)
    timeout_seconds: float = Field(10.0, gt=0)

    @field_validator("budget_thresholds")
    @classmethod
    def _shares(cls, shares: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0 < share <= 10 for share in shares):
            raise ValueError("each threshold is a share of the budget, above 0 and at most 10")
        return tuple(sorted(set(shares)))


class RealtimeSettings(Strict):
    """Realtime sessions (``GET /v1/realtime``; docs/realtime.md): how large an event may
    be, how long a session may last or stay silent, how long a slow caller may hold the
    relay back, and the bounds of a turn's worst case."""

    max_event_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="largest event either side may send"
    )
    max_audio_chunk_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="most audio bytes one input_audio_buffer.append may carry",
    )
    max_session_seconds: float = Field(3600.0, gt=0, description="the longest a session lasts")
    idle_seconds: float = Field(
        600.0, gt=0, description="how long a session may go without a caller's event"
    )
    send_timeout_seconds: float = Field(
        10.0, gt=0, description="how long a slow caller may keep an event from being sent"
    )
    turn_input_tokens: int = Field(
        32_768,
        gt=0,
        description="a turn's most input tokens, for a model without a context window",
    )
    turn_output_tokens: int = Field(
        4096, gt=0, description="a turn's most output tokens when the caller sets none"
    )
    client_secret_seconds: int = Field(
        600, ge=10, le=3600, description="a client secret's life when the caller sets none"
    )
