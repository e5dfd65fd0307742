"""Typed settings, read once from the YAML config file and ``PARLEY_*`` environment.

This is the only module that reads the environment. Strings in the config may name
environment variables as ``${NAME}`` (secrets stay out of the file); an unset variable is
a configuration error naming the field. ``load_settings`` raises ``ConfigError`` with one
line that names the field and the problem.

``Settings`` composes the sections of ``runtime_settings`` (how the gateway runs) and
``catalog_settings`` (what it serves), checks what spans them (every model a channel
serves is declared, fallbacks name models of the same kind), and re-exports the
section classes the rest of Parley names (``__all__``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from parley.catalog_settings import (
    BreakerOptions,
    ChannelModel,
    ChannelSettings,
    HealthCheckOptions,
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
from parley.runtime_settings import (
    DEFAULT_DATABASE_URL,
    ENV_REF,
    AdminSettings,
    AlertSettings,
    AlertWebhook,
    AudioSettings,
    BatchSettings,
    ContentSettings,
    CorsSettings,
    DatabaseSettings,
    FileSettings,
    ImageSettings,
    LimitSettings,
    MetricsSettings,
    OidcSettings,
    OtlpSettings,
    RealtimeSettings,
    RedisSettings,
    ResponsesSettings,
    RoutingSettings,
    ServerSettings,
    TelemetrySettings,
    UpstreamSettings,
    UsageSettings,
)

__all__ = [
    "AdminSettings",
    "AlertSettings",
    "AlertWebhook",
    "AudioSettings",
    "BatchSettings",
    "BreakerOptions",
    "ChannelModel",
    "ChannelSettings",
    "ConfigError",
    "ContentSettings",
    "CorsSettings",
    "DatabaseSettings",
    "FileSettings",
    "HealthCheckOptions",
    "ImageSettings",
    "LimitSettings",
    "MetricsSettings",
    "ModelKind",
    "ModelSettings",
    "OidcSettings",
    "OtlpSettings",
    "Prices",
    "QualityLevel",
    "RealtimeSettings",
    "RedisSettings",
    "ResponsesSettings",
    "RoutingSettings",
    "ServerSettings",
    "Settings",
    "SpeechOptions",
    "TelemetrySettings",
    "Timeouts",
    "TranscriptFormat",
    "TranscriptionOptions",
    "UpstreamSettings",
    "UsageSettings",
    "load_settings",
]

DEFAULT_CONFIG = Path("parley.yaml")


class ConfigError(Exception):
    """A configuration problem, worded for the operator in one line."""


class Settings(Strict):
    server: ServerSettings = ServerSettings()
    database: DatabaseSettings = DatabaseSettings()
    redis: RedisSettings | None = None
    limits: LimitSettings = LimitSettings()
    usage: UsageSettings = UsageSettings()
    content: ContentSettings = ContentSettings()
    responses: ResponsesSettings = ResponsesSettings()
    files: FileSettings = FileSettings()
    batches: BatchSettings = BatchSettings()
    admin: AdminSettings = AdminSettings()
    metrics: MetricsSettings = MetricsSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    upstream: UpstreamSettings = UpstreamSettings()
    audio: AudioSettings = AudioSettings()
    images: ImageSettings = ImageSettings()
    routing: RoutingSettings = RoutingSettings()
    alerts: AlertSettings = AlertSettings()
    realtime: RealtimeSettings = RealtimeSettings()
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
        _check_cascades(self.models, self.channels, names)
        for key, model_name in self.capabilities.items():
            if model_name not in names:
                raise ValueError(f"capability `{key}` names unknown model `{model_name}`")
        if self.limits.backend == "redis" and self.redis is None:
            raise ValueError("limits.backend is redis but no redis section is set")
        if len({c.name for c in self.channels}) != len(self.channels):
            raise ValueError("channel names must be unique")
        return self


CASCADE_PARTS = (("transcription", "transcription"), ("chat", "chat"), ("speech", "speech"))
"""A cascade's parts, each with the kind of model it names."""


def _check_cascades(
    models: tuple[ModelSettings, ...],
    channels: tuple[ChannelSettings, ...],
    names: dict[str, str],
) -> None:
    """A cascade names declared models of the right kinds, and no channel serves it (its
    parts are served, each by its own channels)."""
    kinds = {model.name: model.kind for model in models}
    served = {entry.name for channel in channels for entry in channel.models}
    for model in models:
        if model.cascade is None:
            continue
        for part, kind in CASCADE_PARTS:
            name = getattr(model.cascade, part)
            target = names.get(name)
            if target is None:
                raise ValueError(f"model `{model.name}`: cascade.{part} names unknown `{name}`")
            if kinds[target] != kind:
                raise ValueError(
                    f"model `{model.name}`: cascade.{part} names `{name}`, of kind "
                    f"{kinds[target]}, not {kind}"
                )
        if model.name in served or any(alias in served for alias in model.aliases):
            raise ValueError(
                f"model `{model.name}` is a cascade (served by its parts): no channel serves it"
            )


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
        _anchor_files_folder(raw, path.parent)
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


def _anchor_files_folder(raw: dict[str, Any], folder: Path) -> None:
    """A relative ``files.folder`` is relative to the config file's folder too."""
    files = raw.get("files")
    kept = files.get("folder") if isinstance(files, dict) else None
    if isinstance(files, dict) and isinstance(kept, str) and not Path(kept).is_absolute():
        files["folder"] = str((folder.absolute() / kept).resolve())


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # only a process that reads the file: workers get their settings as JSON

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

        return ENV_REF.sub(substitute, value)
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
    ("PARLEY_ADMIN_LOCAL_SIGN_IN", ("admin", "local_sign_in")),
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
