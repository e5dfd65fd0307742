"""Capability and channel type name → the adapter serving it.

A channel in the configuration names its ``type`` (``openai``, ``vllm``...); a job asks
this registry for the adapter of its route's type that serves its kind of call
(``serving(CHAT, type)``: the ``Capability`` keys of ``providers/base.py``). An adapter
is registered once per type, under the capabilities its class declares (``serves``). At start-up
(``parley serve``, ``Services.start``) ``check_channel_types`` checks every channel's type
against ``types()``, so an unknown type stops the start with one line naming the field.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, TypeVar

from parley.dialects.call import OPENAI_RESPONSES, Codec
from parley.http import HttpClient
from parley.providers.anthropic import AnthropicAdapter
from parley.providers.azure import AzureEndpoint
from parley.providers.base import (
    CHAT,
    IMAGES,
    MODERATION,
    Capability,
    Chat,
    Completion,
    Embeddings,
    Encodes,
    ReplyBounds,
    Speech,
    Target,
    TokenCount,
    Transcription,
    Voices,
)
from parley.providers.bedrock import BedrockAdapter, BedrockRerank
from parley.providers.bedrock.images import BedrockImages
from parley.providers.cartesia import CartesiaAdapter
from parley.providers.cohere import CohereRerank
from parley.providers.deepgram import DeepgramAdapter
from parley.providers.elevenlabs import ElevenLabsAdapter
from parley.providers.gemini import GeminiAdapter
from parley.providers.gemini.adapter import ApiKeyEndpoint
from parley.providers.gemini.images import GoogleImages
from parley.providers.jina import JinaRerank
from parley.providers.openai import OpenAIAdapter
from parley.providers.openai.images import OpenAIImages
from parley.providers.openai.transcription import TranscriptionAdapter
from parley.providers.openai_audio import OpenAIAudioAdapter
from parley.providers.supertonic import SupertonicAdapter
from parley.providers.tei import TEIRerank
from parley.providers.vertex.adapter import VertexAdapter, VertexEndpoint
from parley.providers.vertex.channels import VertexChannels
from parley.providers.vertex.ranking import VertexRanking
from parley.settings import ChannelSettings, ConfigError, ModelSettings

OPENAI_COMPATIBLE_TYPES = ("openai", "vllm", "ollama", "llamacpp")
"""Types whose upstreams speak OpenAI's wire format, all served by ``OpenAIAdapter``."""

DEFAULT_MAX_TOKENS = 1024
"""``limits.default_max_tokens``'s default, for a registry built without settings."""

TRANSCRIPTION_TYPES = ("openai", "speaches", "vllm")
"""Types whose upstreams speak OpenAI's audio wire format for speech-to-text; ``vllm``
cannot write subtitles (Parley writes them from segments)."""

JINA_RERANK_TYPES = ("jina", "vllm", "llamacpp", "infinity", "openai")
"""Types whose upstreams rerank in Jina's dialect (``POST {base_url}/rerank``); ``cohere``
speaks Cohere's v2 and ``tei`` TEI's own (docs/configuration.md, Rerank channels)."""

P = TypeVar("P")


class UnknownProviderType(KeyError):
    """No adapter is registered for this channel type (or not for this capability)."""

    def __init__(self, type_name: str, capability: str, known: frozenset[str]) -> None:
        super().__init__(type_name)
        self.type_name = type_name
        names = ", ".join(sorted(known)) or "none"
        self.message = (
            f"No provider adapter serves {capability} for the channel type `{type_name}`"
            f" (known types: {names})."
        )

    def __str__(self) -> str:
        return self.message


class ProviderRegistry:
    """Adapters by capability and channel type name: one table per ``Capability``,
    filled by ``register`` and read by ``serving``."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, Any]] = {}
        """Capability name → channel type → adapter."""

    @classmethod
    def default(
        cls,
        http: HttpClient,
        bounds: ReplyBounds | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        channels: Sequence[ChannelSettings] = (),
    ) -> ProviderRegistry:
        """Every built-in adapter, calling upstreams through the one shared ``http`` client
        and accepting what ``bounds`` allow. ``default_max_tokens`` is what an upstream that
        needs a limit (Anthropic) is sent when the caller gave none. ``channels`` are the
        configured ones: Vertex AI channels' keys are loaded here (channels added later
        have theirs loaded at their first call)."""
        registry = cls()
        openai = OpenAIAdapter(http, bounds)
        openai_images = OpenAIImages(http, bounds)
        for type_name in OPENAI_COMPATIBLE_TYPES:
            registry.register(type_name, openai)
            registry.register(type_name, openai, MODERATION)
            registry.register(type_name, openai_images)
        registry.register("anthropic", AnthropicAdapter(http, bounds, default_max_tokens))
        registry.register(
            "azure-openai", OpenAIAdapter(http, bounds, AzureEndpoint(), responses=False)
        )
        registry.register("azure-openai", OpenAIImages(http, bounds, AzureEndpoint()))
        bedrock = BedrockAdapter(http, bounds)
        registry.register("bedrock", bedrock)
        registry.register("bedrock", BedrockImages(bedrock, bounds))
        registry.register("bedrock", BedrockRerank(bedrock, bounds))
        registry.register("gemini", GeminiAdapter(http, bounds))
        registry.register("gemini", GoogleImages(http, bounds, ApiKeyEndpoint()))
        google_cloud = VertexChannels(http)
        google_cloud.prepare(channels)
        registry.register("vertex", VertexAdapter(http, bounds, google_cloud, default_max_tokens))
        registry.register("vertex", VertexRanking(http, bounds, google_cloud))
        registry.register("vertex", GoogleImages(http, bounds, VertexEndpoint(google_cloud)))
        for type_name in TRANSCRIPTION_TYPES:
            adapter = TranscriptionAdapter(http, bounds, writes_subtitles=type_name != "vllm")
            registry.register(type_name, adapter)
        registry.register("openai-audio", OpenAIAudioAdapter(http, bounds))
        registry.register("supertonic", SupertonicAdapter(http, bounds))
        registry.register("deepgram", DeepgramAdapter(http, bounds))
        registry.register("elevenlabs", ElevenLabsAdapter(http, bounds))
        registry.register("cartesia", CartesiaAdapter(http, bounds))
        jina = JinaRerank(http, bounds)
        for type_name in JINA_RERANK_TYPES:
            registry.register(type_name, jina)
        registry.register("cohere", CohereRerank(http, bounds))
        registry.register("tei", TEIRerank(http, bounds))
        return registry

    def register(self, type_name: str, adapter: object, *capabilities: Capability[Any]) -> None:
        """Serve channels of ``type_name`` with ``adapter``, for the ``capabilities``
        given, else for every one the adapter declares (its class's ``serves``). An
        adapter that lacks a capability's methods is a ``TypeError`` here, at start."""
        if not capabilities:
            capabilities = getattr(adapter, "serves", ())
            if not capabilities:
                raise TypeError(f"{type(adapter).__name__} declares no capability (`serves`).")
        for capability in capabilities:
            if not isinstance(adapter, capability.protocol):
                raise TypeError(
                    f"{type(adapter).__name__} does not implement {capability.protocol.__name__}"
                    f" (the capability `{capability.name}`)."
                )
            self._tables.setdefault(capability.name, {})[type_name] = adapter

    def serving(self, capability: Capability[P], type_name: str) -> P:
        """The adapter serving ``capability`` for channels of ``type_name``;
        ``UnknownProviderType`` when none does."""
        try:
            adapter: P = self._tables[capability.name][type_name]  # no cast(): a call less
        except KeyError:
            raise UnknownProviderType(type_name, capability.described, self.types()) from None
        return adapter

    def serves(self, capability: Capability[Any], type_name: str) -> bool:
        """Whether some adapter serves ``capability`` for channels of ``type_name``."""
        return type_name in self._tables.get(capability.name, ())

    def types_serving(self, capability: Capability[Any]) -> frozenset[str]:
        """The channel types some adapter serves ``capability`` for."""
        return frozenset(self._tables.get(capability.name, ()))

    def codec(self, type_name: str, target: Target) -> Codec | None:
        """How the type's chat adapter writes a call for ``target`` in its upstream's
        dialect (what a body process writes ahead for a large body); ``None`` when its
        upstream speaks OpenAI chat (a call is then written as a chat body)."""
        adapter = self._tables.get(CHAT.name, {}).get(type_name)
        return adapter.codec(target) if isinstance(adapter, Encodes) else None

    def types(self) -> frozenset[str]:
        """Every channel type some adapter is registered for."""
        return frozenset().union(*self._tables.values())


def check_native_responses(channels: Sequence[ChannelSettings], registry: ProviderRegistry) -> None:
    """Raise ``ConfigError`` naming the first channel that says ``responses: native``
    although no adapter of its type speaks the Responses API."""
    for index, channel in enumerate(channels):
        if channel.responses == "native" and not _speaks_responses(registry, channel.type):
            raise ConfigError(
                f"channels[{index}].responses: the channel type '{channel.type}' cannot "
                "serve the Responses API natively (use 'translate')"
            )


def _speaks_responses(registry: ProviderRegistry, type_name: str) -> bool:
    if not registry.serves(CHAT, type_name):
        return False
    return OPENAI_RESPONSES in registry.serving(CHAT, type_name).dialects


def check_image_channels(
    channels: Sequence[ChannelSettings], models: Sequence[ModelSettings], registry: ProviderRegistry
) -> None:
    """Raise ``ConfigError`` naming the first channel that serves a ``kind: image`` model
    although no adapter of its type serves images."""
    image_models = {model.name for model in models if model.kind == "image"}
    image_types = registry.types_serving(IMAGES)
    for index, channel in enumerate(channels):
        served = [model.name for model in channel.models if model.name in image_models]
        if served and channel.type not in image_types:
            raise ConfigError(
                f"channels[{index}].models: the channel type '{channel.type}' cannot serve "
                f"the image model '{served[0]}' (image channels: {', '.join(sorted(image_types))})"
            )


def check_channel_types(channels: Sequence[ChannelSettings], known: Collection[str]) -> None:
    """Raise ``ConfigError`` naming the first channel whose ``type`` no adapter serves.

    ``known`` is ``ProviderRegistry.types()``: a type becomes valid by registering an
    adapter for it, never by editing a list here.
    """
    for index, channel in enumerate(channels):
        if channel.type not in known:
            names = ", ".join(sorted(known)) or "none"
            raise ConfigError(
                f"channels[{index}].type: unknown channel type '{channel.type}' (known: {names})"
            )


def _conforms(  # noqa: PLR0917
    openai: OpenAIAdapter,
    anthropic: AnthropicAdapter,
    bedrock: BedrockAdapter,
    gemini: GeminiAdapter,
    vertex: VertexAdapter,
    transcription: TranscriptionAdapter,
    openai_audio: OpenAIAudioAdapter,
    supertonic: SupertonicAdapter,
) -> None:
    """Never called: it has the type checker hold each built-in adapter to the Protocols
    of the capabilities it declares (``register`` checks only the methods' names)."""
    chat: list[Chat] = [openai, anthropic, bedrock, gemini, vertex]
    completion: list[Completion] = [openai, anthropic, bedrock, gemini, vertex]
    embeddings: list[Embeddings] = [openai, gemini, vertex]
    counting: list[TokenCount] = [anthropic, vertex]
    speech: list[Speech] = [openai_audio, supertonic]
    voices: list[Voices] = [openai_audio, supertonic]
    heard: list[Transcription] = [transcription]
    del chat, completion, embeddings, counting, speech, voices, heard
