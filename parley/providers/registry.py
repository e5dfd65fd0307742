"""Channel type name → the adapter serving each capability for that type.

A channel in the configuration names its ``type`` (``openai``, ``vllm``...); the router
asks this registry for the adapter of that type, per capability. At start-up
(``parley serve``, ``Services.start``) ``check_channel_types`` checks every channel's type
against ``types()``, so an unknown type stops the start with one line naming the field.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TypeVar

from parley.dialects.outbound import Codec
from parley.http import HttpClient
from parley.providers.anthropic import AnthropicAdapter
from parley.providers.azure import AzureEndpoint
from parley.providers.base import (
    Chat,
    ChatTranslation,
    Completion,
    Embeddings,
    Encodes,
    Images,
    Messages,
    Moderation,
    ReplyBounds,
    Rerank,
    Responses,
    Speech,
    Target,
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

_Adapter = TypeVar("_Adapter")


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
    """Adapters by channel type name, one table per capability."""

    __slots__ = (
        "_chat",
        "_chat_translation",
        "_completion",
        "_embeddings",
        "_images",
        "_messages",
        "_moderation",
        "_rerank",
        "_responses",
        "_speech",
        "_transcription",
        "_voices",
    )

    def __init__(self) -> None:
        self._chat: dict[str, Chat] = {}
        self._chat_translation: dict[str, ChatTranslation] = {}
        self._messages: dict[str, Messages] = {}
        self._responses: dict[str, Responses] = {}
        self._completion: dict[str, Completion] = {}
        self._embeddings: dict[str, Embeddings] = {}
        self._transcription: dict[str, Transcription] = {}
        self._speech: dict[str, Speech] = {}
        self._voices: dict[str, Voices] = {}
        self._moderation: dict[str, Moderation] = {}
        self._rerank: dict[str, Rerank] = {}
        self._images: dict[str, Images] = {}

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
            registry.register(type_name, chat=openai, completion=openai)
            registry.register(type_name, embeddings=openai, chat_translation=openai)
            registry.register(type_name, responses=openai, moderation=openai)
            registry.register(type_name, responses=openai)
            registry.register(type_name, images=openai_images)
        anthropic = AnthropicAdapter(http, bounds, default_max_tokens)
        registry.register("anthropic", chat=anthropic, completion=anthropic, messages=anthropic)
        registry.register("anthropic", chat_translation=anthropic)
        azure = OpenAIAdapter(http, bounds, AzureEndpoint())
        registry.register("azure-openai", chat=azure, completion=azure)
        registry.register("azure-openai", embeddings=azure, chat_translation=azure)
        registry.register("azure-openai", images=OpenAIImages(http, bounds, AzureEndpoint()))
        bedrock = BedrockAdapter(http, bounds)
        registry.register("bedrock", chat=bedrock, completion=bedrock, chat_translation=bedrock)
        registry.register("bedrock", images=BedrockImages(bedrock, bounds))
        gemini = GeminiAdapter(http, bounds)
        registry.register("gemini", chat=gemini, chat_translation=gemini, completion=gemini)
        registry.register("gemini", embeddings=gemini)
        registry.register("gemini", images=GoogleImages(http, bounds, ApiKeyEndpoint()))
        google_cloud = VertexChannels(http)
        google_cloud.prepare(channels)
        vertex = VertexAdapter(http, bounds, google_cloud, default_max_tokens)
        registry.register("vertex", chat=vertex, chat_translation=vertex, completion=vertex)
        registry.register("vertex", embeddings=vertex, messages=vertex)
        registry.register("vertex", rerank=VertexRanking(http, bounds, google_cloud))
        vertex_images = GoogleImages(http, bounds, VertexEndpoint(google_cloud))
        registry.register("vertex", images=vertex_images)
        for type_name in TRANSCRIPTION_TYPES:
            adapter = TranscriptionAdapter(http, bounds, writes_subtitles=type_name != "vllm")
            registry.register(type_name, transcription=adapter)
        deepgram = DeepgramAdapter(http, bounds)
        registry.register("deepgram", transcription=deepgram, speech=deepgram, voices=deepgram)
        openai_audio = OpenAIAudioAdapter(http, bounds)
        registry.register("openai-audio", speech=openai_audio, voices=openai_audio)
        supertonic = SupertonicAdapter(http, bounds)
        registry.register("supertonic", speech=supertonic, voices=supertonic)
        jina = JinaRerank(http, bounds)
        for type_name in JINA_RERANK_TYPES:
            registry.register(type_name, rerank=jina)
        registry.register("cohere", rerank=CohereRerank(http, bounds))
        registry.register("tei", rerank=TEIRerank(http, bounds))
        registry.register("bedrock", rerank=BedrockRerank(bedrock, bounds))
        elevenlabs = ElevenLabsAdapter(http, bounds)
        registry.register(
            "elevenlabs", speech=elevenlabs, voices=elevenlabs, transcription=elevenlabs
        )
        cartesia = CartesiaAdapter(http, bounds)
        registry.register("cartesia", speech=cartesia, voices=cartesia)
        return registry

    def register(
        self,
        type_name: str,
        *,
        chat: Chat | None = None,
        chat_translation: ChatTranslation | None = None,
        messages: Messages | None = None,
        responses: Responses | None = None,
        completion: Completion | None = None,
        embeddings: Embeddings | None = None,
        transcription: Transcription | None = None,
        speech: Speech | None = None,
        voices: Voices | None = None,
        moderation: Moderation | None = None,
        rerank: Rerank | None = None,
        images: Images | None = None,
    ) -> None:
        """Serve the given capabilities of channels of ``type_name`` with these adapters."""
        if chat is not None:
            self._chat[type_name] = chat
        if chat_translation is not None:
            self._chat_translation[type_name] = chat_translation
        if messages is not None:
            self._messages[type_name] = messages
        if responses is not None:
            self._responses[type_name] = responses
        if completion is not None:
            self._completion[type_name] = completion
        if embeddings is not None:
            self._embeddings[type_name] = embeddings
        if transcription is not None:
            self._transcription[type_name] = transcription
        if speech is not None:
            self._speech[type_name] = speech
        if voices is not None:
            self._voices[type_name] = voices
        if moderation is not None:
            self._moderation[type_name] = moderation
        if rerank is not None:
            self._rerank[type_name] = rerank
        if images is not None:
            self._images[type_name] = images

    def chat(self, type_name: str) -> Chat:
        return self._find(self._chat, type_name, "chat")

    def reads_chat(self, type_name: str) -> bool:
        """Whether the type's chat adapter reads a chat body into another wire format
        (rather than send it on as it is), and so takes what OpenAI's cannot say: signed
        thinking in ``thinking_blocks`` (``dialects/openai_chat.py``)."""
        adapter = self._chat.get(type_name)
        return adapter is not None and not isinstance(adapter, OpenAIAdapter)

    def codec(self, type_name: str, target: Target) -> Codec | None:
        """How the type's chat adapter writes a chat body for ``target`` in its
        upstream's dialect; ``None`` when it sends the chat body on as it is."""
        adapter = self._chat.get(type_name)
        return adapter.codec(target) if isinstance(adapter, Encodes) else None

    def chat_translation(self, type_name: str) -> ChatTranslation:
        return self._find(self._chat_translation, type_name, "chat streams in another dialect")

    def messages(self, type_name: str, target: Target) -> Messages | None:
        """The type's Messages adapter, when the target's upstream speaks Anthropic's
        Messages API (a Messages caller's call is then passed through); ``None``
        otherwise."""
        adapter = self._messages.get(type_name)
        return adapter if adapter is not None and adapter.relays(target) else None

    def responses(self, type_name: str) -> Responses | None:
        """The type's Responses adapter, when its upstreams can serve OpenAI's Responses
        API (used for channels that say ``responses: native``); ``None`` otherwise."""
        return self._responses.get(type_name)

    def completion(self, type_name: str) -> Completion:
        return self._find(self._completion, type_name, "completions")

    def embeddings(self, type_name: str) -> Embeddings:
        return self._find(self._embeddings, type_name, "embeddings")

    def transcription(self, type_name: str) -> Transcription:
        return self._find(self._transcription, type_name, "speech-to-text")

    def speech(self, type_name: str) -> Speech:
        return self._find(self._speech, type_name, "speech")

    def voices(self, type_name: str) -> Voices:
        return self._find(self._voices, type_name, "voices")

    def moderation(self, type_name: str) -> Moderation:
        return self._find(self._moderation, type_name, "moderations")

    def rerank(self, type_name: str) -> Rerank:
        return self._find(self._rerank, type_name, "rerank")

    def images(self, type_name: str) -> Images:
        return self._find(self._images, type_name, "images")

    def image_types(self) -> frozenset[str]:
        """The channel types that can serve image models."""
        return frozenset(self._images)

    def types(self) -> frozenset[str]:
        """Every channel type some adapter is registered for."""
        tables = (
            self._chat,
            self._messages,
            self._completion,
            self._embeddings,
            self._transcription,
            self._speech,
            self._voices,
            self._moderation,
            self._rerank,
            self._images,
        )
        return frozenset().union(*tables)

    def _find(self, table: dict[str, _Adapter], type_name: str, capability: str) -> _Adapter:
        try:
            return table[type_name]
        except KeyError:
            raise UnknownProviderType(type_name, capability, self.types()) from None


def check_native_responses(channels: Sequence[ChannelSettings], registry: ProviderRegistry) -> None:
    """Raise ``ConfigError`` naming the first channel that says ``responses: native``
    although no adapter of its type can relay the Responses API."""
    for index, channel in enumerate(channels):
        if channel.responses == "native" and registry.responses(channel.type) is None:
            raise ConfigError(
                f"channels[{index}].responses: the channel type '{channel.type}' cannot "
                "serve the Responses API natively (use 'translate')"
            )


def check_image_channels(
    channels: Sequence[ChannelSettings], models: Sequence[ModelSettings], registry: ProviderRegistry
) -> None:
    """Raise ``ConfigError`` naming the first channel that serves a ``kind: image`` model
    although no adapter of its type serves images."""
    image_models = {model.name for model in models if model.kind == "image"}
    for index, channel in enumerate(channels):
        served = [model.name for model in channel.models if model.name in image_models]
        if served and channel.type not in registry.image_types():
            raise ConfigError(
                f"channels[{index}].models: the channel type '{channel.type}' cannot serve "
                f"the image model '{served[0]}' (image channels: "
                f"{', '.join(sorted(registry.image_types()))})"
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
