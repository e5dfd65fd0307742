"""The adapter for Amazon Bedrock's Converse API (``type: bedrock``).

The canonical call (``dialects/call.py``: decoded once from whatever dialect its caller
spoke) is written as a Converse body (``dialects/bedrock_converse.py``), sent to
``{base_url}/model/{model id}/converse`` (``/converse-stream`` for a stream) with the
model id percent-encoded, and signed with AWS Signature Version 4 (service
``bedrock``) by the channel's credentials (``sigv4.py``). A stream's event-stream frames
are read into chat chunks (``dialects/converse_to_chat.py``), which a caller of another
dialect's translator renders (``Chained``). Classic completions are sent as one user
turn, as for Anthropic. Errors map by Bedrock's exception names (``refusal.py``).

JSON output follows the channel's ``aws.structured_output``: a ``json_schema`` goes as
Converse's native ``outputConfig``, or by a forced tool (as ``json_object`` always
does), whose input comes back as the reply's text, whole and streamed
(``dialects/bedrock_converse.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import ClassVar, TypeVar

import orjson
from yarl import URL

from parley import upstream_json
from parley.catalog_settings import AwsSettings
from parley.dialects import bedrock_converse
from parley.dialects.call import BEDROCK_CONVERSE, ChatCall, Dialect, Speaks
from parley.dialects.canonical import Reply, Unsupported
from parley.dialects.converse_to_chat import ConverseToChat
from parley.dialects.outbound import Codec, outbound
from parley.dialects.translator import Chained, ChunkTranslator, Failure, Translator
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, UpstreamError
from parley.http import HttpClient, prepare
from parley.http import Reply as HttpReply
from parley.providers.anthropic.completions import CompletionChunks, completed, completion_call
from parley.providers.base import (
    CHAT,
    COMPLETION,
    ReplyBounds,
    Serves,
    Target,
    stream_cut_short,
    upstream_errors,
    upstream_failure,
)
from parley.providers.bedrock.refusal import refusal, stream_failure
from parley.providers.bedrock.sigv4 import Credentials, Signer, encode_segment
from parley.providers.translated import TranslatedStream
from parley.sse import EventTooLarge

T = TypeVar("T")
SERVICE = "bedrock"
EVENT_STREAM = "application/vnd.amazon.eventstream"
Clock = Callable[[], datetime]
SPEAKS: Speaks = (BEDROCK_CONVERSE,)


class BedrockAdapter:
    """``Chat`` (the canonical call translated: Converse has no caller of its own) and
    ``Completion`` over the one ``HttpClient``."""

    __slots__ = ("_bounds", "_clock", "_http", "_signers")
    serves: ClassVar[Serves] = (CHAT, COMPLETION)
    dialects = frozenset(SPEAKS)

    def __init__(
        self, http: HttpClient, bounds: ReplyBounds | None = None, clock: Clock | None = None
    ) -> None:
        self._http = http
        self._bounds = bounds or ReplyBounds()
        self._clock = clock or _utc_now
        self._signers: dict[AwsSettings, Signer] = {}
        """One signer per channel's credentials, which keeps the day's signing key."""

    def speaks(self, target: Target) -> Speaks:
        return SPEAKS

    def relay(
        self, target: Target, dialect: Dialect, body: JSON, beta: str | None
    ) -> Awaitable[JSON]:
        raise _no_pass_through(dialect)

    def relay_stream(
        self,
        target: Target,
        dialect: Dialect,
        body: JSON,
        beta: str | None,
        translator: Translator[T],
    ) -> TranslatedStream[T]:
        raise _no_pass_through(dialect)

    def codec(self, target: Target) -> Codec:
        """How this adapter writes a call for ``target`` (``dialects/outbound.py``)."""
        return _codec(target)

    async def generate(self, target: Target, call: ChatCall) -> Reply:
        payload, json_output = _translated(call, target)
        with upstream_errors(target.channel):
            reply = await self.send(target, "converse", payload)
            raw = await reply.read(self._bounds.max_reply_bytes)
            if reply.status >= 300:
                raise refusal(target.channel, reply.status, raw, secret(target), reply.headers)
            found = upstream_json.loads(raw)
        if not isinstance(found, dict):
            raise _malformed(target.channel)
        return bedrock_converse.decode_reply(found, target.model, json_output)

    def generate_stream(
        self, target: Target, call: ChatCall, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        """The Converse events read into chat chunks, which ``translator`` renders."""
        payload, json_output = _translated(call, target)
        reader = self._reader(target, json_output)
        return self._stream(target, payload, Chained(reader, translator))

    async def completion(self, target: Target, body: JSON) -> JSON:
        return completed(await self.generate(target, completion_call(body)))

    def completion_stream(
        self, target: Target, body: JSON, translator: ChunkTranslator[T]
    ) -> TranslatedStream[T]:
        payload, json_output = _translated(completion_call(body), target)
        reader = CompletionChunks(self._reader(target, json_output))
        return self._stream(target, payload, Chained(reader, translator))

    def _reader(self, target: Target, json_output: bool) -> ConverseToChat:
        return ConverseToChat(self._bounds.max_event_bytes, target.model, json_output=json_output)

    def _stream(
        self, target: Target, payload: JSON, translator: Translator[T]
    ) -> TranslatedStream[T]:
        limit = self._bounds.max_reply_bytes

        def send() -> Awaitable[HttpReply]:
            return self.send(target, "converse-stream", payload)

        def start(reply: HttpReply) -> Awaitable[None]:
            return _check_stream_start(reply, target, limit)

        def fault(failure: Failure) -> UpstreamError:
            return _fault(target, failure)

        return TranslatedStream(target.channel, send, start, translator, fault)

    def send(self, target: Target, action: str, payload: JSON) -> Awaitable[HttpReply]:
        """The client's coroutine sending ``payload`` to the model's ``action``
        (``converse``, ``converse-stream``, ``invoke``), signed."""
        aws = target.options
        if not isinstance(aws, AwsSettings):
            raise UpstreamError(f"The channel `{target.channel}` has no AWS credentials.")
        signer = self._signers.get(aws)
        if signer is None:
            credentials = Credentials(aws.access_key_id, aws.secret_access_key, aws.session_token)
            signer = self._signers[aws] = Signer(credentials, aws.region, SERVICE)
        origin, host, prefix = _origin(target.base_url)
        path = f"{prefix}/model/{encode_segment(target.model)}/{action}"
        body = orjson.dumps(payload)
        now = self._clock()
        headers = signer.headers(
            "POST", host, path, query="", body=body, content_type="application/json", now=now
        )
        headers["Accept"] = EVENT_STREAM if action == "converse-stream" else "application/json"
        head = prepare("POST", f"{origin}{path}", headers, encoded=True)
        timeout = target.stream_timeout if action == "converse-stream" else target.read_timeout
        return self._http.send(
            head, body, connect_timeout=target.connect_timeout, read_timeout=timeout
        )


def _utc_now() -> datetime:
    return datetime.now(UTC)


@functools.cache
def _origin(base_url: str) -> tuple[str, str, str]:
    """``scheme://host[:port]``, the ``Host`` header as sent, and the path before
    ``/model`` (empty for Bedrock's own endpoint)."""
    url = URL(base_url)
    host = url.host_port_subcomponent or ""
    return f"{url.scheme}://{host}", host, url.raw_path.rstrip("/")


def _no_pass_through(dialect: Dialect) -> RuntimeError:
    return RuntimeError(f"Bedrock speaks Converse only: a {dialect} call is translated.")


def _codec(target: Target) -> Codec:
    """How a call is written for the target's channel (its ``aws.structured_output``)."""
    aws = target.options
    return Codec(
        "bedrock", structured=aws.structured_output if isinstance(aws, AwsSettings) else "native"
    )


def _translated(call: ChatCall, target: Target) -> tuple[JSON, bool]:
    """The canonical call as a Converse body (or the one already written in a body
    process), and whether its JSON output rides in the forced ``JSON_TOOL``; what
    Converse cannot say is a 400."""
    try:
        return outbound(call, _codec(target), target.model)
    except Unsupported as error:
        raise InvalidRequest(error.message, param=error.param) from None


def secret(target: Target) -> str | None:
    """What of the channel's credentials an error must never show."""
    aws = target.options
    return aws.secret_access_key if isinstance(aws, AwsSettings) else target.api_key


async def _check_stream_start(reply: HttpReply, target: Target, limit: int) -> None:
    """Raise if the upstream refused, or answered without an event stream."""
    if reply.status >= 300:
        raw = await reply.read(limit)
        raise refusal(target.channel, reply.status, raw, secret(target), reply.headers)
    if reply.content_type != EVENT_STREAM:
        raise UpstreamError(f"The upstream channel `{target.channel}` did not stream its reply.")


def _fault(target: Target, failure: Failure) -> UpstreamError:
    if failure.payload is not None:
        return stream_failure(target.channel, failure.payload, secret(target))
    if failure.too_large:
        error = upstream_failure(target.channel, EventTooLarge(0, []))
        assert error is not None
        return error
    if failure.truncated:
        return stream_cut_short(target.channel)
    return _malformed(target.channel)


def _malformed(channel: str) -> UpstreamError:
    return UpstreamError(f"The upstream channel `{channel}` sent a reply that is not well formed.")
