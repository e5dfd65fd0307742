"""Typed settings, read once from the YAML config file and ``PARLEY_*`` environment.

This is the only module that reads the environment. Strings in the config may name
environment variables as ``${NAME}`` (secrets stay out of the file); an unset variable is
a configuration error naming the field. ``load_settings`` raises ``ConfigError`` with one
line that names the field and the problem.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from parley.catalog_settings import (
    BreakerOptions,
    ChannelModel,
    ChannelSettings,
    ModelKind,
    ModelSettings,
    Prices,
    QualityLevel,
    SpeechOptions,
    Strict,
    Timeouts,
    TranscriptFormat,
    TranscriptionOptions,
)

__all__ = [
    "AdminSettings",
    "AudioSettings",
    "BreakerOptions",
    "ChannelModel",
    "ChannelSettings",
    "ConfigError",
    "CorsSettings",
    "DatabaseSettings",
    "LimitSettings",
    "MetricsSettings",
    "ModelKind",
    "ModelSettings",
    "Prices",
    "QualityLevel",
    "RedisSettings",
    "RoutingSettings",
    "ServerSettings",
    "Settings",
    "SpeechOptions",
    "Timeouts",
    "TranscriptFormat",
    "TranscriptionOptions",
    "UpstreamSettings",
    "UsageSettings",
    "load_settings",
]

DEFAULT_CONFIG = Path("parley.yaml")
DEFAULT_DATABASE_URL = "sqlite:///./parley.db"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigError(Exception):
    """A configuration problem, worded for the operator in one line."""


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
    on_failure: Literal["local", "reject"] = "local"
    retry_seconds: float = Field(5.0, gt=0)
    prefix: str = "parley"


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
    """Where records are kept if the database is unreachable at shutdown (replayed at start)."""


class ResponsesSettings(Strict):
    """Stored responses of the Responses API (``POST /v1/responses`` with ``store``)."""

    retention_days: float = Field(30, gt=0)
    """How long a stored response can be retrieved or continued; pruned after."""
    flush_seconds: float = Field(0.2, gt=0)
    """How often stored responses waiting in memory are written (in batches)."""
    queue_size: int = Field(2_000, gt=0)
    """The most responses that may wait to be written; past it, new ones are not stored
    (the call still succeeds, and a line is logged)."""
    prune_every_seconds: float = Field(3600.0, gt=0)


MIN_ADMIN_TOKEN_CHARS = 16
"""The admin token opens every group, key and budget: a short one is refused at start."""


class AdminSettings(Strict):
    token: str | None = None
    """The bearer token of ``/admin`` and the dashboard's password; unset or empty: off."""

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
        if token and len(token) < MIN_ADMIN_TOKEN_CHARS and not _ENV_REF.fullmatch(token):
            raise ValueError(
                f"must be at least {MIN_ADMIN_TOKEN_CHARS} characters long (it opens the "
                "whole admin API); make one with: "
                "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        return token

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
    the threads it runs on (``parley.audio.pool``)."""

    max_seconds: float = Field(7200.0, gt=0, description="the longest clip accepted (else 400)")
    decode_cpu_seconds: float = Field(2.0, gt=0, description="CPU time any clip may take to decode")
    decode_cpu_seconds_per_hour: float = Field(
        20.0, ge=0, description="more CPU time for each hour of audio decoded"
    )
    threads: int = Field(4, gt=0, description="clips measured at once")
    threads_per_group: int = Field(1, gt=0, description="clips of one group measured at once")


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


class Settings(Strict):
    server: ServerSettings = ServerSettings()
    database: DatabaseSettings = DatabaseSettings()
    redis: RedisSettings | None = None
    limits: LimitSettings = LimitSettings()
    usage: UsageSettings = UsageSettings()
    responses: ResponsesSettings = ResponsesSettings()
    admin: AdminSettings = AdminSettings()
    metrics: MetricsSettings = MetricsSettings()
    upstream: UpstreamSettings = UpstreamSettings()
    audio: AudioSettings = AudioSettings()
    routing: RoutingSettings = RoutingSettings()
    channels: tuple[ChannelSettings, ...] = ()
    models: tuple[ModelSettings, ...] = ()
    capabilities: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        names: dict[str, str] = {}
        for model in self.models:
            for name in (model.name, *model.aliases, *model.retired_aliases):
                if name in names:
                    raise ValueError(f"model name `{name}` is declared twice")
                names[name] = model.name
        for channel in self.channels:
            for served in channel.models:
                if served.name not in names:
                    raise ValueError(
                        f"channel `{channel.name}` serves `{served.name}`, "
                        "which is not declared under models"
                    )
        _check_fallbacks(self.models, names)
        for key, model_name in self.capabilities.items():
            if model_name not in names:
                raise ValueError(f"capability `{key}` names unknown model `{model_name}`")
        if self.limits.backend == "redis" and self.redis is None:
            raise ValueError("limits.backend is redis but no redis section is set")
        if len({c.name for c in self.channels}) != len(self.channels):
            raise ValueError("channel names must be unique")
        return self


def _check_fallbacks(models: tuple[ModelSettings, ...], names: dict[str, str]) -> None:
    """Fallbacks name declared models of the same kind, other than the model itself."""
    kinds = {model.name: model.kind for model in models}
    for model in models:
        for field, fallbacks in (
            ("fallbacks", model.fallbacks),
            ("fallbacks_on_context", model.fallbacks_on_context),
        ):
            for name in fallbacks:
                target = names.get(name)
                if target is None:
                    raise ValueError(f"model `{model.name}`: {field} names unknown `{name}`")
                if target == model.name:
                    raise ValueError(f"model `{model.name}`: {field} names the model itself")
                if kinds[target] != model.kind:
                    raise ValueError(
                        f"model `{model.name}`: {field} names `{name}`, of kind "
                        f"{kinds[target]}, not {model.kind}"
                    )


def load_settings(
    path: Path | None, environ: Mapping[str, str], *, secrets: bool = True
) -> Settings:
    """Read the config file (if any) and apply ``PARLEY_*`` overrides.

    ``secrets=False`` is for the admin commands, which use only the database: a
    ``${NAME}`` outside the ``database`` section whose variable is unset stays as written
    instead of failing. Every unset variable is reported at once, in one line. A relative
    SQLite path in the file is relative to the file's folder, not the current directory.
    """
    raw: dict[str, Any] = {}
    path = config_file(path, environ)
    if path is not None:
        raw = _read_yaml(path)
    unset: list[tuple[str, str]] = []
    raw = _expand_env(raw, environ, "", unset)
    _report_unset(unset, path, secrets)
    if path is not None:
        _anchor_sqlite_path(raw, path.parent)
    _apply_overrides(raw, environ)
    _aws_from_environment(raw, environ)
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_first_problem(exc, path)) from None


def config_file(path: Path | None, environ: Mapping[str, str]) -> Path | None:
    """The config file to read: ``path``, else ``$PARLEY_CONFIG``, else ``./parley.yaml``
    if it exists, else none (the embedded defaults)."""
    if path is None and environ.get("PARLEY_CONFIG"):
        path = Path(environ["PARLEY_CONFIG"])
    if path is None and DEFAULT_CONFIG.exists():
        path = DEFAULT_CONFIG
    return path


def _report_unset(unset: list[tuple[str, str]], path: Path | None, secrets: bool) -> None:
    """One line naming every unset variable (those the command needs) and where."""
    needed = [(w, n) for w, n in unset if secrets or w.split(".")[0].startswith("database")]
    if not needed:
        return
    source = f"{path}: " if path is not None else ""
    if len(needed) == 1:
        where, name = needed[0]
        raise ConfigError(f"{source}{where}: environment variable {name} is not set")
    places = ", ".join(f"{name} ({where})" for where, name in needed)
    raise ConfigError(f"{source}{len(needed)} environment variables are not set: {places}")


_SQLITE_FILE = re.compile(r"^(sqlite(?:\+\w+)?:///)([^?]*)(.*)$", re.DOTALL)


def sqlite_path(url: str) -> str | None:
    """The file path of a SQLite URL (``None`` for memory databases and other backends)."""
    match = _SQLITE_FILE.match(url)
    if match is None:
        return None
    path = match.group(2)
    if path in ("", ":memory:") or path.startswith("file:") or "mode=memory" in match.group(3):
        return None
    return path


def anchored_database_url(url: str, folder: Path) -> str:
    """``url`` with a relative SQLite path made absolute against ``folder``."""
    path = sqlite_path(url)
    if path is None or Path(path).is_absolute():
        return url
    match = _SQLITE_FILE.match(url)
    assert match is not None
    absolute = (folder.absolute() / path).resolve()
    return f"{match.group(1)}{absolute}{match.group(3)}"


def _anchor_sqlite_path(raw: dict[str, Any], folder: Path) -> None:
    """A file without a database URL gets the default one, next to the file too."""
    database = raw.get("database")
    if database is None:
        database = raw["database"] = {}
    if isinstance(database, dict):
        url = database.get("url", DEFAULT_DATABASE_URL)
        if isinstance(url, str):
            database["url"] = anchored_database_url(url, folder)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


def _expand_env(
    value: Any, environ: Mapping[str, str], where: str, unset: list[tuple[str, str]]
) -> Any:
    """Substitute ``${NAME}``; an unset one stays as written and is added to ``unset``."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                unset.append((where or "config", name))
                return match.group(0)
            return environ[name]

        return _ENV_REF.sub(substitute, value)
    if isinstance(value, dict):
        return {
            k: _expand_env(v, environ, f"{where}.{k}" if where else str(k), unset)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_expand_env(v, environ, f"{where}[{i}]", unset) for i, v in enumerate(value)]
    return value


_OVERRIDES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PARLEY_HOST", ("server", "host")),
    ("PARLEY_PORT", ("server", "port")),
    ("PARLEY_DATABASE_URL", ("database", "url")),
    ("PARLEY_REDIS_URL", ("redis", "url")),
    ("PARLEY_LIMITS_BACKEND", ("limits", "backend")),
    ("PARLEY_ADMIN_TOKEN", ("admin", "token")),
    ("PARLEY_SECRET_KEYS", ("admin", "secret_keys")),
    ("PARLEY_METRICS_TOKEN", ("metrics", "token")),
)


def _apply_overrides(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    for variable, (section, field) in _OVERRIDES:
        if variable in environ:
            target = raw.get(section)
            if not isinstance(target, dict):
                target = {}
                raw[section] = target
            target[field] = environ[variable]


AWS_VARIABLES = (
    ("access_key_id", "AWS_ACCESS_KEY_ID"),
    ("secret_access_key", "AWS_SECRET_ACCESS_KEY"),
    ("session_token", "AWS_SESSION_TOKEN"),
)


def _aws_from_environment(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    """A ``bedrock`` channel's credentials and region the config leaves out come from
    the standard AWS variables (the key pair only when the config names neither half,
    so a configured key is never paired with another's session token), and its
    ``base_url`` from the region."""
    channels = raw.get("channels")
    for index, channel in enumerate(channels if isinstance(channels, list) else ()):
        if not isinstance(channel, dict) or channel.get("type") != "bedrock":
            continue
        given = channel.get("aws")
        aws = dict(given) if isinstance(given, dict) else {}
        if "access_key_id" not in aws and "secret_access_key" not in aws:
            for field, variable in AWS_VARIABLES:
                if environ.get(variable):
                    aws[field] = environ[variable]
        region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
        if "region" not in aws and region:
            aws["region"] = region
        if "region" not in aws:
            raise ConfigError(
                f"channels.{index}.aws.region: a bedrock channel needs a region "
                "(aws.region, or AWS_REGION)"
            )
        channel["aws"] = aws
        if "base_url" not in channel:
            channel["base_url"] = f"https://bedrock-runtime.{aws['region']}.amazonaws.com"


def _first_problem(exc: ValidationError, path: Path | None) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "config"
    message = str(error["msg"]).removeprefix("Value error, ")
    source = f"{path}: " if path is not None else ""
    return f"{source}{field}: {message}"
