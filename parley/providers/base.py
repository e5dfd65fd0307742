"""Capability Protocols every provider adapter implements, and the shared error mapping.

The canonical request and reply are OpenAI's wire shapes, as Python dicts: an adapter for
an OpenAI-compatible upstream mostly forwards them; an adapter for another wire format
translates both ways. Adapters see neither the caller's HTTP request, nor the store, nor
billing: they are given a ``Target`` (where and as what to call) and a body.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass
from typing import IO, Any, Protocol

from parley.domain.transcripts import ResponseFormat, Task
from parley.errors import ParleyError, UpstreamError, UpstreamTimeout
from parley.http import BrokenReply, ConnectFailed, Disconnected, HttpError

JSON = dict[str, Any]
Batches = AsyncIterator[Sequence[JSON]]
"""A stream's chunks, grouped as they arrived: each item holds what one read from the
upstream delivered (never empty), so the caller can relay them in one write."""


@dataclass(frozen=True, slots=True)
class Target:
    """One upstream call's destination: the channel, its credentials and model name."""

    channel: str
    base_url: str
    api_key: str | None
    model: str
    connect_timeout: float
    read_timeout: float


class UpstreamRefused(UpstreamError):
    """The upstream answered with an error status.

    ``retryable`` says whether another channel may succeed where this one failed
    (5xx, 429, or the channel's own credentials refused); otherwise the request itself
    was at fault and the upstream's status and message are relayed to the caller.
    """

    def __init__(self, message: str, *, upstream_status: int, retryable: bool) -> None:
        super().__init__(message)
        self.upstream_status = upstream_status
        self.retryable = retryable
        if not retryable:
            self.status = upstream_status if upstream_status in (400, 413, 422) else 400
            self.type = "invalid_request_error"
            self.code = "upstream_rejected"


class Chat(Protocol):
    async def chat(self, target: Target, body: JSON) -> JSON:
        """A whole chat completion, as OpenAI's ``chat.completion`` object."""

    def chat_stream(self, target: Target, body: JSON) -> AbstractAsyncContextManager[Batches]:
        """Streamed chat: ``chat.completion.chunk`` objects, in batches as they arrive."""


class Completion(Protocol):
    async def completion(self, target: Target, body: JSON) -> JSON:
        """A whole classic completion, as OpenAI's ``text_completion`` object."""

    def completion_stream(self, target: Target, body: JSON) -> AbstractAsyncContextManager[Batches]:
        """Streamed classic completion: ``text_completion`` chunks, in batches as they arrive."""


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


class Transcription(Protocol):
    async def transcribe(self, target: Target, request: TranscriptionRequest) -> Transcript:
        """A whole transcription or translation, in the asked ``response_format``."""

    def transcribe_stream(
        self, target: Target, request: TranscriptionRequest
    ) -> AbstractAsyncContextManager[Batches]:
        """Streamed transcription as OpenAI's events: ``transcript.text.delta`` objects,
        then one ``transcript.text.done`` (without ``usage``), in batches as they arrive."""


@contextmanager
def upstream_errors(channel: str) -> Iterator[None]:
    """Map the HTTP client's exceptions to the error tree, naming no URL or secret."""
    try:
        yield
    except ParleyError:
        raise
    except TimeoutError:
        raise UpstreamTimeout(f"The upstream channel `{channel}` did not answer in time.") from None
    except ConnectFailed:
        raise UpstreamError(f"The upstream channel `{channel}` is unreachable.") from None
    except (BrokenReply, Disconnected):
        raise UpstreamError(f"The upstream channel `{channel}` sent a broken reply.") from None
    except HttpError:
        raise UpstreamError(f"The upstream channel `{channel}` failed.") from None
    except ValueError:
        raise UpstreamError(
            f"The upstream channel `{channel}` sent a reply that is not valid JSON."
        ) from None
