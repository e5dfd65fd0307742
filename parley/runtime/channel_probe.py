"""A channel's test button: one minimal real call to one of its models, timed.

The cheapest call the model's kind allows: a chat or a completion of at most one token,
the embedding, moderation or rerank of one word, the synthesis of one short word, the
transcription of half a second of silence. The outcome is the latency, the status (200,
or the upstream's or the gateway's error status) and the upstream's error message,
redacted of the channel's credential and of anything shaped like one. Nothing is
metered: the call is the operator's, not a group's.

The same call is the scheduled health check's (``runtime/health_checks.py``), which
hands a failure's ``error`` to the breakers as a failed call's.
"""

from __future__ import annotations

import asyncio
import io
import time
import wave
from dataclasses import dataclass

from parley.dialects import openai_chat
from parley.dialects.call import OPENAI_CHAT, ChatCall, passes_through
from parley.errors import (
    ParleyError,
    UpstreamError,
    UpstreamRefused,
    UpstreamTimeout,
)
from parley.providers.base import (
    CHAT,
    COMPLETION,
    EMBEDDINGS,
    MODERATION,
    RERANK,
    SPEECH,
    TRANSCRIPTION,
    AudioUpload,
    RerankRequest,
    SpeechRequest,
    Target,
    TranscriptionRequest,
)
from parley.providers.not_found import NOT_FOUND, not_found_hint
from parley.providers.openai.realtime import realtime_socket
from parley.providers.redaction import redact
from parley.providers.registry import ProviderRegistry, UnknownProviderType
from parley.settings import ChannelModel, ChannelSettings, ModelKind

PROMPT = "Say OK."
PROBE_SECONDS = 30.0
REALTIME_PROBE_BYTES = 1024 * 1024
"""The largest first event of a realtime session a probe reads (its ``session.created``)."""
"""The longest a test may take, whatever the channel's own timeouts."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    model: str
    ok: bool
    status: int
    latency_ms: int
    message: str
    """The upstream's (or the gateway's) error, redacted; empty on success."""
    error: UpstreamError | None = None
    """The failure as a call's would be told to the breakers; ``None`` on success and for
    a failure that is the configuration's, not the upstream's (an unknown channel type,
    a request the gateway refused to send)."""


def target_of(channel: ChannelSettings, served: ChannelModel) -> Target:
    timeouts = channel.timeouts
    return Target(
        channel=channel.name,
        base_url=channel.base_url,
        api_key=channel.api_key,
        model=served.upstream or served.name,
        connect_timeout=min(timeouts.connect, PROBE_SECONDS),
        read_timeout=min(timeouts.read, PROBE_SECONDS),
        idle_timeout=min(timeouts.idle, PROBE_SECONDS),
        options=channel.options,
        type_name=channel.type,
    )


def _silence() -> bytes:
    """Half a second of 16 kHz mono silence as a WAV file."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes(b"\0\0" * 8_000)
    return buffer.getvalue()


async def _call(providers: ProviderRegistry, kind: ModelKind, type_: str, target: Target) -> None:
    model = target.model
    if kind == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1}
        adapter = providers.serving(CHAT, type_)
        if passes_through(OPENAI_CHAT, adapter.speaks(target)):
            await adapter.relay(target, OPENAI_CHAT, body, None)
        else:
            await adapter.generate(target, ChatCall(OPENAI_CHAT, body, openai_chat.decode_request))
    elif kind == "completion":
        await providers.serving(COMPLETION, type_).completion(
            target, {"model": model, "prompt": PROMPT, "max_tokens": 1}
        )
    elif kind == "embedding":
        await providers.serving(EMBEDDINGS, type_).embeddings(
            target, {"model": model, "input": "ok"}
        )
    elif kind == "moderation":
        await providers.serving(MODERATION, type_).moderations(
            target, {"model": model, "input": "ok"}
        )
    elif kind == "rerank":
        await providers.serving(RERANK, type_).rerank(target, RerankRequest("ok", ("ok",)))
    elif kind == "realtime":  # a session opened and its first event read: nothing billed
        async with realtime_socket(target, REALTIME_PROBE_BYTES) as socket:
            await socket.receive()
    elif kind == "speech":
        request = SpeechRequest(input="OK.", voice=None, response_format="wav")
        async with providers.serving(SPEECH, type_).speech(target, request) as audio:
            async for _ in audio.pieces:
                pass
    else:
        upload = AudioUpload(io.BytesIO(_silence()), "probe.wav", "audio/wav")
        request_ = TranscriptionRequest("transcribe", upload, "json")
        await providers.serving(TRANSCRIPTION, type_).transcribe(target, request_)


async def probe(
    providers: ProviderRegistry, channel: ChannelSettings, served: ChannelModel, kind: ModelKind
) -> ProbeResult:
    started = time.perf_counter()
    status, message = 200, ""
    failure: UpstreamError | None = None
    target = target_of(channel, served)
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            await _call(providers, kind, channel.type, target)
    except UpstreamRefused as error:
        status, message, failure = error.upstream_status, error.detail or error.message, error
        if status == NOT_FOUND and not error.detail:  # the provider's own words say more
            message = f"{message} {not_found_hint(channel.name, target.model)}"
    except UpstreamError as error:
        status, message, failure = error.status, error.message, error
    except ParleyError as error:
        status, message = error.status, error.message
    except UnknownProviderType:
        status, message = 400, f"A {channel.type} channel cannot serve {kind} models."
    except TimeoutError:
        status, message = 504, f"No answer within {PROBE_SECONDS:.0f} seconds."
        failure = UpstreamTimeout(message)
    latency = round((time.perf_counter() - started) * 1000)
    return ProbeResult(
        model=served.name,
        ok=status == 200,
        status=status,
        latency_ms=latency,
        message=redact(message, channel.api_key)[:1000],
        error=failure,
    )
