"""The provider contract: what an adapter implements, in one file.

A kind of call is a ``Capability`` (``CHAT``, ``TOKEN_COUNT``, ``COMPLETION``,
``EMBEDDINGS``, ``TRANSCRIPTION``, ``SPEECH``, ``VOICES``, at the end of this file): a
key naming one Protocol, with that kind's canonical request and reply. An adapter class
declares what it serves (``serves``), the registry files it under each
(``providers/registry.py``) and a job asks for one by key (``serving(CHAT, type)``).

Generation (``Chat``) takes the canonical call, ``dialects.call.ChatCall``: the caller's
body in its dialect and the canonical ``Request`` read from it. The adapter says which
dialects its target speaks; ``dialects.call.passes_through`` decides, and the adapter
either relays the caller's body (a reply in the caller's dialect) or writes the
``Request`` with its own codec in ``dialects/`` (a canonical ``Reply``, or its stream
read into chat chunks for the caller's renderer). Classic completions keep their own
request (OpenAI's ``prompt`` body), embeddings OpenAI's ``input`` body; speech,
transcription and voices their request types below.
Every generation stream is fed to the caller's sans-IO translator
(``providers/translated.py``). Adapters see neither the caller's HTTP request, nor the
store, nor billing: they are given a ``Target`` (where and as what to call) and a call.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from typing import IO, Any, Generic, Protocol, TypeVar, runtime_checkable

from parley.catalog_settings import ChannelOptions
from parley.dialects.call import ChatCall, Codec, Dialect, Speaks
from parley.dialects.canonical import Reply
from parley.dialects.translator import ChunkTranslator, Translator
from parley.domain.transcripts import ResponseFormat, Task
from parley.domain.wire import JSON
from parley.errors import ParleyError, UpstreamError, UpstreamTimeout, UpstreamUnreachable
from parley.http import (
    BrokenReply,
    ConnectFailed,
    ConnectTimeout,
    Disconnected,
    HeadTooLarge,
    HttpError,
    PoolTimeout,
    ReplyTooLarge,
)
from parley.sse import EventTooLarge

Batches = AsyncIterator[Sequence[JSON]]
"""A stream's chunks, grouped as they arrived: each item holds what one read from the
upstream delivered (never empty), so the caller can relay them in one write."""
T = TypeVar("T")
Translations = AbstractAsyncContextManager[AsyncIterator[Sequence[T]]]
"""A stream fed to a sans-IO translator (``providers/translated.py``): what it made of
each read, never empty."""


@dataclass(frozen=True, slots=True)
class Target:
    """One upstream call's destination: the channel, its credentials and model name."""

    channel: str
    base_url: str
    api_key: str | None
    model: str
    connect_timeout: float
    read_timeout: float
    """Silence allowed while a whole reply, or a reply's head, is awaited."""
    idle_timeout: float | None = None
    """Silence allowed between a stream's reads (``read_timeout`` when unset)."""
    options: ChannelOptions | None = None
    """The channel's provider-specific settings (``bedrock``'s AWS credentials, an
    ``azure-openai`` channel's endpoint style), for the adapters that need them."""
    type_name: str = ""
    """The channel's ``type`` (OpenAI's own API, ``openai``, is the only one with
    service tiers)."""
    native_responses: bool = False
    """The channel serves the Responses API itself (``responses: native``)."""

    @property
    def stream_timeout(self) -> float:
        return self.idle_timeout if self.idle_timeout is not None else self.read_timeout


@dataclass(frozen=True, slots=True)
class ReplyBounds:
    """The most an adapter accepts from an upstream (``upstream`` in the settings)."""

    max_reply_bytes: int = 64 * 1024 * 1024
    max_event_bytes: int = 8 * 1024 * 1024


@runtime_checkable
class Chat(Protocol):
    """Generation: one ``ChatCall`` (``dialects/call.py``), whatever dialect its caller
    speaks. The job asks ``dialects.call.passes_through(dialect, speaks(target))``
    and then calls ``relay`` (the caller's body to an upstream that speaks it) or
    ``generate`` (the canonical ``Request`` written in the upstream's own dialect, its
    reply read back as a canonical ``Reply``); the adapter owns only its outbound codec."""

    @property
    def dialects(self) -> frozenset[Dialect]:
        """Every dialect some upstream of this adapter speaks (start-up checks)."""

    def speaks(self, target: Target) -> Speaks:
        """The dialects the target's upstream speaks, the one a call is translated into
        first (Vertex AI: Messages for Claude models, Gemini's otherwise)."""

    def relay(
        self, target: Target, dialect: Dialect, body: JSON, beta: str | None
    ) -> Awaitable[JSON]:
        """A whole reply passed through: the caller's ``body`` sent in its ``dialect`` (one
        the target speaks) but for the upstream's model, with a Messages caller's
        ``anthropic-beta``; the reply as the upstream sent it. A relay never needs the
        canonical call, so the commonest call (chat to an OpenAI-compatible upstream)
        never builds a ``ChatCall``."""

    def relay_stream(
        self,
        target: Target,
        dialect: Dialect,
        body: JSON,
        beta: str | None,
        translator: Translator[T],
    ) -> Translations[T]:
        """A stream passed through: the upstream's bytes fed to the caller dialect's
        relay (``OpenAIRelay``, ``MessagesRelay``, ``ResponsesRelay``) as they arrive."""

    def generate(self, target: Target, call: ChatCall) -> Awaitable[Reply]:
        """A whole reply translated: ``call.request`` in the upstream's dialect, its reply
        read as the canonical ``Reply``; what the upstream cannot say is a 400."""

    def generate_stream(
        self, target: Target, call: ChatCall, translator: ChunkTranslator[T]
    ) -> Translations[T]:
        """A stream translated: ``call.request`` in the upstream's dialect, its stream
        read into the canonical chunk stream (chat chunks) for the caller's renderer:
        an OpenAI chat upstream's bytes go to ``translator`` as they are, any other's
        through its reader first (``dialects.translator.Chained``)."""


@runtime_checkable
class Encodes(Protocol):
    """A chat adapter whose upstream speaks a dialect other than OpenAI chat: it writes a
    call it translates with a ``Codec`` (``dialects/outbound.py``)."""

    def codec(self, target: Target) -> Codec:
        """How it writes a call for ``target``: what a body process writes ahead for a
        large body (``ChatCall.translated``)."""


@runtime_checkable
class TokenCount(Protocol):
    """Anthropic's ``count_tokens``, for a Messages call an upstream passes through."""

    def count_tokens(self, target: Target, call: ChatCall) -> Awaitable[int]:
        """The upstream's count of the call's input tokens."""


@runtime_checkable
class Completion(Protocol):
    def completion(self, target: Target, body: JSON) -> Awaitable[JSON]:
        """A whole classic completion, as OpenAI's ``text_completion`` object."""

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> Translations[T]:
        """A streamed classic completion, rendered for the caller by ``translator``: an
        OpenAI-compatible upstream's bytes as they are, any other upstream's read into
        ``text_completion`` chunks first."""


@runtime_checkable
class Embeddings(Protocol):
    def embeddings(self, target: Target, body: JSON) -> Awaitable[JSON]:
        """Embeddings of the body's ``input``, as OpenAI's ``list`` of ``embedding`` objects."""


@runtime_checkable
class Moderation(Protocol):
    def moderations(self, target: Target, body: JSON) -> Awaitable[JSON]:
        """A moderation of the body's ``input``, as OpenAI's ``{id, model, results}``."""


@dataclass(frozen=True, slots=True)
class RerankRequest:
    """A rerank in Parley's terms: the query and each document as the text to rank it
    by (object documents already turned into text by ``api/rerank.py``). ``top_n`` is
    how many results the caller wants (``None``: all); an engine that ignores it is
    trimmed by Parley."""

    query: str
    documents: tuple[str, ...]
    top_n: int | None = None


@dataclass(frozen=True, slots=True)
class RankedDocument:
    """One document's place: its index in the request's ``documents`` and its score."""

    index: int
    relevance_score: float


@dataclass(frozen=True, slots=True)
class RerankReply:
    """An engine's ranking, as it sent it (checked: each index in range, once; each
    score a finite number), and what it reported of its cost, if anything."""

    results: tuple[RankedDocument, ...]
    input_tokens: int | None = None
    """The tokens the engine said it read (Jina's and vLLM's ``usage``, Cohere's
    ``meta.billed_units.input_tokens``); ``None``: it said nothing valid."""
    search_units: int | None = None
    """The search units the engine billed (Cohere's ``meta.billed_units``)."""


@runtime_checkable
class Rerank(Protocol):
    async def rerank(self, target: Target, request: RerankRequest) -> RerankReply:
        """The documents ranked by relevance to the query, in the engine's own dialect."""


@dataclass(frozen=True, slots=True)
class AudioUpload:
    """The caller's audio, checked and spooled: sent on from ``file`` (seekable)."""

    file: IO[bytes]
    filename: str
    content_type: str
    """The media type of the container sniffed from the bytes (``audio/mpeg``...)."""


@dataclass(frozen=True, slots=True)
class TranscriptionRequest:
    """A speech-to-text call in OpenAI's terms; the adapter encodes it for its engine."""

    task: Task
    upload: AudioUpload
    response_format: ResponseFormat
    options: tuple[tuple[str, str], ...] = ()
    """Other form fields as sent on (``language``, ``prompt``, ``temperature``...)."""
    timestamp_granularities: tuple[str, ...] = ()
    include: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Transcript:
    """A whole reply in OpenAI's shape for the asked format: an object (json,
    verbose_json; without ``usage``, which is Parley's to state) or text (text, srt, vtt)."""

    body: JSON | str
    engine_seconds: float | None = None
    """The audio length the engine reported, if it did (recorded, never billed)."""


@runtime_checkable
class Transcription(Protocol):
    async def transcribe(self, target: Target, request: TranscriptionRequest) -> Transcript:
        """A whole transcription or translation, in the asked ``response_format``."""

    def transcribe_stream(
        self, target: Target, request: TranscriptionRequest
    ) -> AbstractAsyncContextManager[Batches]:
        """Streamed transcription as OpenAI's events: ``transcript.text.delta`` objects,
        then one ``transcript.text.done`` (without ``usage``), in batches as they arrive."""


@dataclass(frozen=True, slots=True)
class SpeechRequest:
    """One synthesis, in the engine's terms: Parley has already chosen the voice's engine
    name (``None``: the engine's default), the format to ask for and the quality steps."""

    input: str
    voice: str | None
    response_format: str
    speed: float = 1.0
    instructions: str | None = None
    steps: int | None = None
    language: str | None = None
    """ISO 639-1 code of the voice's language, when the catalogue knows it."""
    sse: bool = False
    """Ask the engine for ``speech.audio.delta`` events where it can give them."""
    sample_rate: int | None = None
    """The model's ``sample_rate``: the rate to ask for, of an engine that offers several
    (the adapter says the rate it got in ``SpeechAudio.sample_rate``)."""


class SpeechAudio:
    """A synthesis under way: the audio's format and its bytes as they arrive.

    ``pieces`` yields the audio (never an empty piece), whatever the engine's framing (raw
    bytes or base64 SSE deltas); once it is exhausted, ``usage`` holds what the engine
    reported, if anything. A failure mid-way raises an ``UpstreamError`` from ``pieces``.
    """

    __slots__ = ("format", "pieces", "sample_rate", "streamed_events", "usage")

    def __init__(
        self,
        format: str,
        pieces: AsyncGenerator[bytes, None] | None = None,
        *,
        sample_rate: int | None = None,
        streamed_events: bool = False,
    ) -> None:
        self.format = format
        self.pieces = pieces if pieces is not None else _nothing()
        self.sample_rate = sample_rate
        self.streamed_events = streamed_events
        self.usage: JSON | None = None


async def _nothing() -> AsyncGenerator[bytes, None]:
    nothing: tuple[bytes, ...] = ()
    for piece in nothing:
        yield piece


@runtime_checkable
class Speech(Protocol):
    def speech(
        self, target: Target, request: SpeechRequest
    ) -> AbstractAsyncContextManager[SpeechAudio]:
        """Synthesize; entered once the engine's reply head has arrived (or refused)."""


@dataclass(frozen=True, slots=True)
class EngineRoster:
    """An engine's voices: its own built-in ones and those uploaded to it (by anyone)."""

    builtin: tuple[str, ...]
    uploaded: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class VoiceClip:
    """A reference clip to clone a voice from, under the engine name Parley chose."""

    name: str
    audio: bytes
    media_type: str
    consent: str
    transcript: str | None = None


class VoicesUnsupported(UpstreamError):
    """The engine has no voice management (it cannot list, or cannot clone)."""


@runtime_checkable
class Voices(Protocol):
    async def list_voices(self, target: Target) -> EngineRoster:
        """The engine's roster; ``VoicesUnsupported`` when it cannot list voices."""

    async def create_voice(self, target: Target, clip: VoiceClip) -> str:
        """Clone a voice; returns the name as the engine spelled it."""

    async def delete_voice(self, target: Target, name: str) -> bool:
        """Delete an uploaded voice; False when the engine did not have it."""


@dataclass(frozen=True, slots=True)
class ImageInput:
    """An image the caller sent (an edit's ``image`` or ``mask``), sniffed and bounded."""

    data: bytes
    media_type: str
    """``image/png``, ``image/jpeg`` or ``image/webp``, from the bytes."""


@dataclass(frozen=True, slots=True)
class ImageRequest:
    """One image generation (no ``inputs``) or edit, in OpenAI's terms; each adapter
    says it in its upstream's. ``None`` is a field the caller left to the model."""

    prompt: str
    n: int = 1
    size: str | None = None
    quality: str | None = None
    background: str | None = None
    output_format: str | None = None
    output_compression: int | None = None
    inputs: tuple[ImageInput, ...] = ()
    mask: ImageInput | None = None
    partial_images: int | None = None
    """Streamed partial images asked for (0 to 3), where the upstream streams."""
    url_reply: bool | None = None
    """The caller's ``response_format``: ``True`` for ``url``, ``False`` for
    ``b64_json``, ``None`` when not given (then not sent on: GPT image models refuse it)."""
    options: tuple[tuple[str, str | int], ...] = ()
    """Other fields OpenAI's API takes (``style``, ``moderation``, ``input_fidelity``,
    ``user``...), sent on as given by upstreams that speak it; others ignore them."""

    @property
    def edit(self) -> bool:
        return bool(self.inputs)


@dataclass(frozen=True, slots=True)
class Picture:
    """One image an upstream made: its bytes, their media type, and the prompt the
    upstream rewrote it from (DALL·E 3), if it said."""

    data: bytes
    media_type: str
    revised_prompt: str | None = None


@dataclass(frozen=True, slots=True)
class ImageReply:
    """An upstream's images, with what it said it made (``size``, ``quality``,
    ``background``, ``output_format``: ``None`` when it did not say) and the usage it
    reported (OpenAI's ``usage`` object, unchecked: ``domain.usage`` reads it)."""

    images: tuple[Picture, ...]
    size: str | None = None
    quality: str | None = None
    background: str | None = None
    output_format: str | None = None
    usage: JSON | None = None


@dataclass(frozen=True, slots=True)
class PartialImage:
    """A streamed partial image: a preview of image ``index``, replaced by later ones."""

    data: bytes
    media_type: str
    index: int


ImageEvent = PartialImage | ImageReply
"""An item of an image stream: a partial image, or finished images (with their usage)."""


@runtime_checkable
class Images(Protocol):
    def images(self, target: Target, request: ImageRequest) -> Awaitable[ImageReply]:
        """Generate (or, with ``request.inputs``, edit) images; the whole reply."""

    def images_stream(
        self, target: Target, request: ImageRequest
    ) -> AbstractAsyncContextManager[AsyncIterator[Sequence[ImageEvent]]]:
        """The same, streamed: partial images as the upstream sends them, then the
        finished images (one ``ImageReply`` per image, or one for all). An upstream that
        cannot stream is sent the whole call, its reply the only event."""


P = TypeVar("P")


@dataclass(frozen=True, slots=True, eq=False)
class Capability(Generic[P]):
    """One kind of call an adapter may serve: the key the registry files adapters
    under, and the Protocol (``protocol``) an adapter serving it implements.

    ``serving(CAPABILITY, type_name)`` is typed by it (``P``), so a job that asks for
    ``SPEECH`` gets a ``Speech``. A new kind of call is one Protocol above and one
    constant below (docs/development.md, Where a new kind of call goes)."""

    name: str
    """The key, unique among capabilities (``chat``, ``speech``...)."""
    protocol: type
    """The Protocol ``P`` itself, which a registered adapter is checked against."""
    described: str
    """How an error names it: "No provider adapter serves {described} for ..."."""


Serves = tuple[Capability[Any], ...]
"""What an adapter class declares it serves (its ``serves`` class attribute)."""

CHAT: Capability[Chat] = Capability("chat", Chat, "chat")
TOKEN_COUNT: Capability[TokenCount] = Capability("token_count", TokenCount, "token counting")
COMPLETION: Capability[Completion] = Capability("completion", Completion, "completions")
EMBEDDINGS: Capability[Embeddings] = Capability("embeddings", Embeddings, "embeddings")
TRANSCRIPTION: Capability[Transcription] = Capability(
    "transcription", Transcription, "speech-to-text"
)
SPEECH: Capability[Speech] = Capability("speech", Speech, "speech")
VOICES: Capability[Voices] = Capability("voices", Voices, "voices")
MODERATION: Capability[Moderation] = Capability("moderation", Moderation, "moderations")
RERANK: Capability[Rerank] = Capability("rerank", Rerank, "rerank")
IMAGES: Capability[Images] = Capability("images", Images, "images")


@contextmanager
def upstream_errors(channel: str) -> Iterator[None]:
    """Map the HTTP client's exceptions to the error tree (``upstream_failure``)."""
    try:
        yield
    except ParleyError:
        raise
    except Exception as error:
        failure = upstream_failure(channel, error)
        if failure is None:
            raise
        raise failure from None


def stream_cut_short(channel: str) -> UpstreamError:
    """The error for a stream whose body ended before the upstream's own end of stream
    (``Failure.truncated``): the upstream failed after the reply began."""
    return UpstreamError(
        f"The upstream channel `{channel}` ended its stream before the stream was complete."
    )


def upstream_failure(channel: str, error: Exception) -> UpstreamError | None:
    """The error tree's name for an HTTP client's exception, naming no URL or secret;
    ``None`` for an exception that is not the upstream's doing.

    Only a timeout waiting for the reply is an ``UpstreamTimeout`` (504, not fallen
    over: the upstream may be working on it). Running out of time for a connection, or
    of free connections, means the request never left: a 502, and the next channel.
    """
    if isinstance(error, ParleyError):
        return None
    if isinstance(error, PoolTimeout):
        return UpstreamError(
            f"The upstream channel `{channel}` has no free connection (all are busy)."
        )
    if isinstance(error, ConnectTimeout):
        return UpstreamUnreachable(
            f"The upstream channel `{channel}` is unreachable (no connection in time)."
        )
    if isinstance(error, TimeoutError):
        return UpstreamTimeout(f"The upstream channel `{channel}` did not answer in time.")
    if isinstance(error, ConnectFailed):
        return UpstreamUnreachable(f"The upstream channel `{channel}` is unreachable.")
    if isinstance(error, ReplyTooLarge):
        return UpstreamError(
            f"The upstream channel `{channel}` sent a reply larger than Parley accepts."
        )
    if isinstance(error, EventTooLarge):
        return UpstreamError(
            f"The upstream channel `{channel}` sent a streamed event larger than Parley accepts."
        )
    if isinstance(error, HeadTooLarge):
        return UpstreamError(
            f"The upstream channel `{channel}` sent a reply head larger than Parley accepts."
        )
    if isinstance(error, BrokenReply | Disconnected):
        return UpstreamError(f"The upstream channel `{channel}` sent a broken reply.")
    if isinstance(error, HttpError):
        return UpstreamError(f"The upstream channel `{channel}` failed.")
    if isinstance(error, ValueError):
        return UpstreamError(
            f"The upstream channel `{channel}` sent a reply that is not valid JSON."
        )
    return None
