"""Typed settings, read once from the YAML config file and ``PARLEY_*`` environment.

This is the only module that reads the environment. Strings in the config may name
environment variables as ``${NAME}`` (secrets stay out of the file); an unset variable is
a configuration error naming the field. ``load_settings`` raises ``ConfigError`` with one
line that names the field and the problem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from yarl import URL

DEFAULT_CONFIG = Path("parley.yaml")
DEFAULT_DATABASE_URL = "sqlite:///./parley.db"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigError(Exception):
    """A configuration problem, worded for the operator in one line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    max_body_bytes: int = Field(26_214_400, gt=0, description="largest request body accepted")
    max_image_bytes: int = Field(5_242_880, gt=0, description="largest data-URL image accepted")
    shutdown_grace_seconds: float = Field(10.0, ge=0)
    access_log: bool = False
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
        4096, gt=0, description="connections the kernel queues before accept (capped by somaxconn)"
    )


class DatabaseSettings(_Strict):
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


class RedisSettings(_Strict):
    url: str = "redis://127.0.0.1:6379/0"
    on_failure: Literal["local", "reject"] = "local"
    retry_seconds: float = Field(5.0, gt=0)
    prefix: str = "parley"


class LimitSettings(_Strict):
    backend: Literal["memory", "redis"] = "memory"
    per_worker: bool = False
    default_max_tokens: int = Field(1024, gt=0)
    cache_refresh_seconds: float = Field(2.0, gt=0)
    unknown_key_lookups_per_second: float = Field(20.0, gt=0)
    """Store look-ups of keys not in the directory, across the process (a wrong-key flood)."""
    budget_period: Literal["month", "day"] = "month"


class UsageSettings(_Strict):
    retention_days: int = Field(30, ge=1)
    flush_seconds: float = Field(1.0, gt=0)
    queue_size: int = Field(10_000, gt=0)
    batch_size: int = Field(500, gt=0)
    prune_every_seconds: float = Field(3600.0, gt=0)
    spill_dir: str = "."
    """Where records are kept if the database is unreachable at shutdown (replayed at start)."""


class AdminSettings(_Strict):
    token: str | None = None


class UpstreamSettings(_Strict):
    """Bounds on what Parley accepts from any upstream (defaults no real model reaches)."""

    max_reply_bytes: int = Field(64 * 1024 * 1024, gt=0, description="largest whole reply")
    max_event_bytes: int = Field(8 * 1024 * 1024, gt=0, description="largest streamed event")
    max_connections_per_origin: int = Field(1000, gt=0)


class Timeouts(_Strict):
    connect: float = Field(10.0, gt=0)
    read: float = Field(300.0, gt=0)


class ChannelModel(_Strict):
    name: str
    upstream: str | None = None


class ChannelSettings(_Strict):
    name: str
    type: str = "openai"
    base_url: str
    api_key: str | None = None
    models: tuple[ChannelModel, ...]
    priority: int = 0
    weight: int = Field(1, ge=1)
    timeouts: Timeouts = Timeouts()

    @field_validator("models", mode="before")
    @classmethod
    def _names_or_objects(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if not URL(url).raw_host:
            raise ValueError("must name a host")
        if any(mark in url for mark in " \r\n\0"):
            raise ValueError("must not hold spaces or line breaks")
        return url.rstrip("/")

    @field_validator("api_key")
    @classmethod
    def _one_line(cls, key: str | None) -> str | None:
        if key is not None and any(mark in key for mark in "\r\n\0"):
            raise ValueError("must not hold a line break (check the environment variable)")
        return key


class Prices(_Strict):
    """USD prices; converted to integer nano-dollars by ``domain.pricing``."""

    input_per_1k: Decimal = Decimal(0)
    output_per_1k: Decimal = Decimal(0)
    per_1k_characters: Decimal = Decimal(0)
    per_minute: Decimal = Decimal(0)


ModelKind = Literal["chat", "completion", "embedding", "speech", "transcription"]


class ModelSettings(_Strict):
    name: str
    kind: ModelKind = "chat"
    aliases: tuple[str, ...] = ()
    retired_aliases: tuple[str, ...] = ()
    context_window: int | None = Field(None, gt=0)
    vision: bool = False
    owned_by: str = "parley"
    prices: Prices = Prices()


class Settings(_Strict):
    server: ServerSettings = ServerSettings()
    database: DatabaseSettings = DatabaseSettings()
    redis: RedisSettings | None = None
    limits: LimitSettings = LimitSettings()
    usage: UsageSettings = UsageSettings()
    admin: AdminSettings = AdminSettings()
    upstream: UpstreamSettings = UpstreamSettings()
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
        for key, model_name in self.capabilities.items():
            if model_name not in names:
                raise ValueError(f"capability `{key}` names unknown model `{model_name}`")
        if self.limits.backend == "redis" and self.redis is None:
            raise ValueError("limits.backend is redis but no redis section is set")
        if len({c.name for c in self.channels}) != len(self.channels):
            raise ValueError("channel names must be unique")
        return self


def load_settings(path: Path | None, environ: Mapping[str, str]) -> Settings:
    """Read the config file (if any) and apply ``PARLEY_*`` overrides."""
    raw: dict[str, Any] = {}
    if path is None and environ.get("PARLEY_CONFIG"):
        path = Path(environ["PARLEY_CONFIG"])
    if path is None and DEFAULT_CONFIG.exists():
        path = DEFAULT_CONFIG
    if path is not None:
        raw = _read_yaml(path)
    raw = _expand_env(raw, environ, "")
    _apply_overrides(raw, environ)
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_first_problem(exc, path)) from None


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


def _expand_env(value: Any, environ: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise ConfigError(f"{where or 'config'}: environment variable {name} is not set")
            return environ[name]

        return _ENV_REF.sub(substitute, value)
    if isinstance(value, dict):
        return {
            k: _expand_env(v, environ, f"{where}.{k}" if where else str(k))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_expand_env(v, environ, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


_OVERRIDES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PARLEY_HOST", ("server", "host")),
    ("PARLEY_PORT", ("server", "port")),
    ("PARLEY_DATABASE_URL", ("database", "url")),
    ("PARLEY_REDIS_URL", ("redis", "url")),
    ("PARLEY_LIMITS_BACKEND", ("limits", "backend")),
    ("PARLEY_ADMIN_TOKEN", ("admin", "token")),
)


def _apply_overrides(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    for variable, (section, field) in _OVERRIDES:
        if variable in environ:
            target = raw.get(section)
            if not isinstance(target, dict):
                target = {}
                raw[section] = target
            target[field] = environ[variable]


def _first_problem(exc: ValidationError, path: Path | None) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "config"
    message = str(error["msg"]).removeprefix("Value error, ")
    source = f"{path}: " if path is not None else ""
    return f"{source}{field}: {message}"
