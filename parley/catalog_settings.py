"""What the gateway serves, as configured: channels (where and how to call an upstream)
and models (kinds, prices, and the options of speech and transcription models).

Part of the typed settings; ``parley.settings`` reads the file and the environment and
re-exports these classes.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from yarl import URL

from parley.domain.images import QUALITIES, is_size
from parley.service_account import AccountError, read_account


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timeouts(Strict):
    """How long a channel may take, in seconds (docs/configuration.md states the rules)."""

    connect: float = Field(10.0, gt=0)
    """A connection with its TLS handshake; past it the next channel is tried."""
    read: float = Field(300.0, gt=0)
    """Silence while a whole reply (or a reply's head) is awaited."""
    first_token: float = Field(60.0, gt=0)
    """A stream's first event; past it the next channel is tried (nothing reached the
    caller yet)."""
    idle: float = Field(120.0, gt=0)
    """Silence between a started stream's reads; past it the stream ends with an error
    event and what was delivered is billed."""
    total: float | None = Field(None, gt=0)
    """The whole call, first byte to last; unset: unbounded."""


class BreakerOptions(Strict):
    """A channel's circuit breaker: when it opens, and for how long (docs/operations.md)."""

    enabled: bool = True
    failures: int = Field(5, ge=1)
    """Failures in a row that open it."""
    error_rate: float = Field(0.5, gt=0, le=1)
    """Share of failed calls in the window that opens it, once ``min_calls`` were seen."""
    window: int = Field(20, ge=2, le=1000)
    """Recent calls the error rate is taken over."""
    min_calls: int = Field(10, ge=1)
    cooldown_seconds: float = Field(10.0, gt=0)
    """How long it stays open before one probe call is let through (an upstream's 429
    ``retry-after`` replaces it, up to ``max_cooldown_seconds``)."""
    max_cooldown_seconds: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> BreakerOptions:
        if self.min_calls > self.window:
            raise ValueError("min_calls must be at most window")
        if self.max_cooldown_seconds < self.cooldown_seconds:
            raise ValueError("max_cooldown_seconds must be at least cooldown_seconds")
        return self


class HealthCheckOptions(Strict):
    """A channel's scheduled health check (docs/operations.md, Health checks): the test
    button's call to each of its models every ``interval_seconds``, told to the breakers
    as calls are. Off unless an interval is set: each check is a real call the operator
    pays for (one token of output per chat model)."""

    interval_seconds: float | None = Field(None, ge=0.01, le=86_400)
    """How often each model is checked; unset: never."""
    disable_after: int | None = Field(None, ge=1, le=1000)
    """Checks in a row that find every model failing before the checker disables the
    channel (stored channels only); it re-enables it once a check passes again. Unset:
    never disabled by checks."""

    @model_validator(mode="after")
    def _needs_interval(self) -> HealthCheckOptions:
        if self.disable_after is not None and self.interval_seconds is None:
            raise ValueError("disable_after needs interval_seconds")
        return self


class ChannelModel(Strict):
    name: str
    upstream: str | None = None


class AwsSettings(Strict):
    """A ``bedrock`` channel's region and credentials, and how it asks for JSON output;
    what the config leaves out comes from ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN`` (``settings.load_settings``)."""

    region: str = Field(pattern=r"^[a-z0-9-]{1,40}$")
    access_key_id: str = Field(pattern=r"^[A-Z0-9]{4,128}$")
    secret_access_key: str = Field(repr=False, min_length=1)
    session_token: str | None = Field(None, repr=False)
    structured_output: Literal["native", "tool"] = "native"
    """``json_schema`` output through Converse's ``outputConfig`` (the models that
    support structured output), or by forcing a tool whose input is the schema (any
    model that takes tools)."""

    @field_validator("secret_access_key", "session_token")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and any(mark in value for mark in "\r\n\0 "):
            raise ValueError("must not hold a space or a line break (check the variable)")
        return value


class AzureSettings(Strict):
    """An ``azure-openai`` channel's endpoint style and authentication."""

    api_version: str | None = Field(None, pattern=r"^[A-Za-z0-9.-]{1,40}$")
    """Set: deployments (``/openai/deployments/{model}/...?api-version=``, the channel's
    upstream model names the deployment); unset: the v1 endpoint (``/openai/v1/...``)."""
    auth: Literal["api-key", "bearer"] = "api-key"
    """``api-key``: the channel's key in the ``api-key`` header; ``bearer``: the key is a
    Microsoft Entra access token, sent as ``Authorization: Bearer``."""


class VertexOptions(Strict):
    """A ``type: vertex`` channel's Google Cloud project, region and service account."""

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,62}$")
    region: str = Field(pattern=r"^[a-z0-9-]+$")
    """``us-central1``, ``europe-west4``... or ``global``."""
    credentials_file: str
    """A service-account key file (JSON): Parley signs a token request with its key."""

    @field_validator("credentials_file")
    @classmethod
    def _service_account(cls, path: str) -> str:
        try:
            read_account(path)
        except AccountError as error:
            raise ValueError(str(error)) from None
        return path


class DeepgramOptions(Strict):
    """A ``type: deepgram`` channel's settings for ``/v1/listen`` and ``/v1/speak``."""

    punctuate: bool = True
    """Sent as ``punctuate`` on every transcription (OpenAI's transcripts are punctuated)."""
    smart_format: bool = True
    """Sent as ``smart_format``: numbers, dates and the like written as people write them."""
    language: str | None = Field(None, pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")
    """The ``language`` sent when the caller names none; unset: Deepgram's own default."""
    sample_rate: Literal[8000, 16000, 24000, 32000, 48000] = 24000
    """The rate Aura is asked to speak ``wav`` and ``pcm`` at (16-bit mono)."""


ChannelOptions = AwsSettings | AzureSettings | VertexOptions | DeepgramOptions
"""A channel's provider-specific settings, handed to its adapter with each call."""


class ChannelSettings(Strict):
    name: str
    type: str = "openai"
    base_url: str
    api_key: str | None = None
    models: tuple[ChannelModel, ...]
    priority: int = 0
    weight: int = Field(1, ge=1)
    timeouts: Timeouts = Timeouts()
    breaker: BreakerOptions = BreakerOptions()
    health: HealthCheckOptions = HealthCheckOptions()
    aws: AwsSettings | None = None
    """``type: bedrock`` only (and needed there)."""
    azure: AzureSettings | None = None
    """``type: azure-openai`` only (defaults apply when unset)."""
    vertex: VertexOptions | None = None
    """``type: vertex`` only (and needed there)."""
    deepgram: DeepgramOptions | None = None
    """``type: deepgram`` only (defaults apply when unset)."""

    @model_validator(mode="after")
    def _provider_options(self) -> ChannelSettings:
        if self.type == "bedrock" and self.aws is None:
            raise ValueError(
                "a bedrock channel needs aws (region, access_key_id, secret_access_key), "
                "or AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )
        if self.aws is not None and self.type != "bedrock":
            raise ValueError("aws is for channels of type bedrock")
        if self.azure is not None and self.type != "azure-openai":
            raise ValueError("azure is for channels of type azure-openai")
        if (self.type == "vertex") != (self.vertex is not None):
            raise ValueError(
                "a channel of type vertex needs `vertex` (project, region, "
                "credentials_file), and only such a channel takes it"
            )
        if self.deepgram is not None and self.type != "deepgram":
            raise ValueError("deepgram is for channels of type deepgram")
        return self

    @property
    def options(self) -> ChannelOptions | None:
        """The provider-specific settings its adapter needs, if any."""
        if self.aws is not None:
            return self.aws
        if self.vertex is not None:
            return self.vertex
        if self.type == "azure-openai":
            return self.azure or AzureSettings()
        if self.type == "deepgram":
            return self.deepgram or DeepgramOptions()
        return None

    responses: Literal["translate", "native"] = "translate"
    """How ``POST /v1/responses`` reaches this channel: translated into a chat completion,
    or ``native``: relayed as sent (model renamed) to an upstream that serves the
    Responses API itself, reasoning items and their encrypted content intact."""

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


class Prices(Strict):
    """USD prices; converted to integer nano-dollars by ``domain.pricing``."""

    input_per_1k: Decimal = Decimal(0)
    output_per_1k: Decimal = Decimal(0)
    per_1k_characters: Decimal = Decimal(0)
    per_minute: Decimal = Decimal(0)
    cached_input_per_1k: Decimal | None = None
    """Input tokens read from the upstream's prompt cache; unset: ``input_per_1k``."""
    cache_write_per_1k: Decimal | None = None
    """Input tokens written to the upstream's prompt cache; unset: ``input_per_1k``."""
    per_search_unit: Decimal = Decimal(0)
    """A rerank's search unit: one query over up to 100 documents (Cohere's unit);
    only for ``kind: rerank`` models, which may also (or instead) be priced per token."""

    per_image: dict[str, Decimal] | None = None
    """An image model's price per image by grade: ``"1024x1024/high"``, ``"1024x1024"``
    (any quality), ``"*/low"`` (any size), ``"*"``; the most specific entry wins."""
    image_input_per_1k: Decimal | None = None
    """An image model's input image tokens; unset: ``input_per_1k``."""
    audio_input_per_1k: Decimal | None = Field(None, ge=0)
    """A realtime model's input audio tokens (required for ``kind: realtime``)."""
    cached_audio_input_per_1k: Decimal | None = Field(None, ge=0)
    """Input audio tokens read from the upstream's cache; unset: ``audio_input_per_1k``."""
    audio_output_per_1k: Decimal | None = Field(None, ge=0)
    """A realtime model's output audio tokens (required for ``kind: realtime``)."""

    @field_validator("per_image")
    @classmethod
    def _grades(cls, table: dict[str, Decimal] | None) -> dict[str, Decimal] | None:
        for grade, price in (table or {}).items():
            size, _, quality = grade.partition("/")
            if not (size == "*" or is_size(size)) or not (
                quality in ("", "*") or quality in QUALITIES
            ):
                raise ValueError(
                    f"'{grade}' is not a grade: write SIZE/QUALITY (1024x1024/high), SIZE, "
                    f"*/QUALITY or *, sizes as WxH or auto, qualities among "
                    f"{', '.join(sorted(QUALITIES))}"
                )
            if price < 0:
                raise ValueError(f"the price of '{grade}' must not be negative")
        return table

    batch_discount: Decimal = Field(Decimal(1), ge=0, le=1)
    """What a batch line costs, as a share of every price above (0.5: half); 1, the
    default, bills batch lines as interactive calls."""
    batch_input_per_1k: Decimal | None = None
    """An explicit batch price of input tokens; unset: ``input_per_1k * batch_discount``."""
    batch_output_per_1k: Decimal | None = None
    """An explicit batch price of output tokens; unset: ``output_per_1k * batch_discount``."""


ModelKind = Literal[
    "chat",
    "completion",
    "embedding",
    "speech",
    "transcription",
    "moderation",
    "rerank",
    "image",
    "realtime",
]
REALTIME_PRICES = ("input_per_1k", "output_per_1k", "audio_input_per_1k", "audio_output_per_1k")
"""The prices a ``kind: realtime`` model must state: a turn is never billed at $0 because
its model's prices were left out."""
TranscriptFormat = Literal["json", "text", "srt", "vtt", "verbose_json"]


class TranscriptionOptions(Strict):
    """What a ``kind: transcription`` model can do (its engine must be able to)."""

    translate: bool = False
    stream: bool = False
    formats: tuple[TranscriptFormat, ...] = ("json", "text", "srt", "vtt", "verbose_json")

    @field_validator("formats")
    @classmethod
    def _some_formats(cls, formats: tuple[str, ...]) -> tuple[str, ...]:
        if not formats:
            raise ValueError("must name at least one response format")
        return formats


QualityLevel = Literal["standard", "high", "max"]


class CascadeOptions(Strict):
    """A realtime voice built from parts (``models[].cascade``, docs/realtime.md): Parley
    speaks the Realtime protocol itself, each part a call of its own model."""

    transcription: str
    """A ``kind: transcription`` model: what hears each turn."""
    chat: str
    """A ``kind: chat`` model: what answers (streamed, with tools)."""
    speech: str
    """A ``kind: speech`` model: what speaks the answer, sentence by sentence."""
    voice: str | None = None
    """The speech model's voice until a session names another; unset: the speech
    model's default voice."""


class SpeechOptions(Strict):
    """A speech model's options (``models[].audio`` when ``kind: speech``); docs/audio.md."""

    voices_catalogue: str | None = None
    """YAML file of curated voice metadata, merged into the engine's roster by id."""
    default_voice: str | None = None
    """Sent when the caller names no voice (or an unknown one); else the engine's default."""
    unsupported_formats: Literal["wav", "reject"] = "reject"
    """opus, aac, flac: ``wav`` falls back to WAV silently (fast model), ``reject`` is a 400."""
    quality_steps: dict[QualityLevel, int] | None = None
    """``quality`` level → engine steps; unset: the model refuses ``quality``."""
    default_quality: QualityLevel | None = None
    instruction: bool = False
    cloning: bool = False
    transcript_cloning: bool = False
    voice_listing: bool = True
    """False for engines without voice management: the voice list is then a 404."""
    status_on_every_voice: bool = False
    """True: every voice record carries ``status: ready``; else only catalogued ones."""
    max_input_chars: int = Field(4096, gt=0)
    sample_rate: int = Field(24000, gt=0)
    """The engine's rate, which ``pcm`` replies (16-bit little-endian mono) are at."""
    max_clip_bytes: int = Field(10_485_760, gt=0)
    engine_clip_seconds: float | None = Field(30.0, gt=0)
    """Clips longer than the engine accepts are cut to this many seconds (as WAV)."""

    @model_validator(mode="after")
    def _consistent(self) -> SpeechOptions:
        if self.default_quality is not None and self.default_quality not in (
            self.quality_steps or {}
        ):
            raise ValueError("default_quality must be one of quality_steps")
        for level, steps in (self.quality_steps or {}).items():
            if not 1 <= steps <= 100:
                raise ValueError(f"quality_steps.{level} must be 1 to 100")
        if self.transcript_cloning and not self.cloning:
            raise ValueError("transcript_cloning needs cloning")
        return self


class ModelSettings(Strict):
    name: str
    kind: ModelKind = "chat"
    aliases: tuple[str, ...] = ()
    retired_aliases: tuple[str, ...] = ()
    context_window: int | None = Field(None, gt=0)
    vision: bool = False
    owned_by: str = "parley"
    prices: Prices = Prices()
    transcription: TranscriptionOptions | None = None
    audio: SpeechOptions | None = None
    """Speech options; only for ``kind: speech`` (defaults apply when unset)."""
    cascade: CascadeOptions | None = None
    """Only for ``kind: realtime``: the model is built from these parts, not relayed."""
    fallbacks: tuple[str, ...] = ()
    """Models (of the same kind) that answer, in order, when every channel of this one
    fails before the caller got a byte, or is shut by its breaker."""
    fallbacks_on_context: tuple[str, ...] = ()
    """Models (of the same kind) tried, in order, when an upstream refuses the request
    as too long for this model's context window."""

    @model_validator(mode="after")
    def _options_fit_the_kind(self) -> ModelSettings:
        if self.transcription is not None and self.kind != "transcription":
            raise ValueError("transcription options are only for kind: transcription models")
        if self.audio is not None and self.kind != "speech":
            raise ValueError("audio options are only for kind: speech models")
        if self.cascade is not None and self.kind != "realtime":
            raise ValueError("a cascade is only for kind: realtime models")
        if self.kind == "speech" and (self.prices.input_per_1k or self.prices.output_per_1k):
            raise ValueError("a speech model is priced per_1k_characters, not per token")
        if self.prices.per_search_unit and self.kind != "rerank":
            raise ValueError("only a kind: rerank model is priced per_search_unit")
        image_prices = self.prices.per_image is not None or self.prices.image_input_per_1k
        if image_prices and self.kind != "image":
            raise ValueError("per_image and image_input_per_1k are only for kind: image models")
        self._realtime_prices()
        if self.prices.per_image is not None and (
            self.prices.input_per_1k or self.prices.output_per_1k or self.prices.image_input_per_1k
        ):
            raise ValueError(
                "an image model is priced per_image or per token (input_per_1k, "
                "image_input_per_1k, output_per_1k), not both"
            )
        return self

    def _realtime_prices(self) -> None:
        """A realtime model states its text and audio prices (each may be 0, but said);
        audio prices belong to realtime models only."""
        prices = self.prices
        audio = (prices.audio_input_per_1k, prices.cached_audio_input_per_1k)
        if self.kind != "realtime":
            if any(price is not None for price in (*audio, prices.audio_output_per_1k)):
                raise ValueError("audio token prices are only for kind: realtime models")
            return
        if self.cascade is not None:  # each part is billed at its own model's price
            return
        missing = [name for name in REALTIME_PRICES if name not in prices.model_fields_set]
        if missing:
            raise ValueError(
                "a realtime model must state its prices (its turns are billed by them): "
                f"set prices.{', prices.'.join(missing)}"
            )
