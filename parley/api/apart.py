"""Large chat and Messages bodies read, and large bodies translated, in a body process.

A body over ``server.large_body_bytes`` is never decoded on the serving event loop
(``runtime/body_pool.py`` says why, and how the processes are shared between groups).
``read_chat`` and ``read_messages`` have it read there by the functions that read a
small body here (``chat_request.parse_chat``, ``messages_request.parse_messages``...),
and get back the checked request with its ``messages`` (and any other array over
``BULK_BYTES``) serialized: the serving process wraps those bytes as
``orjson.Fragment``, which ``orjson.dumps`` writes out as they are. A channel that takes
the body as it came (``dialects.call.passes_through``: OpenAI-compatible for chat,
Anthropic's for Messages) gets it so.

A channel of another dialect needs the call translated, which is work per item too:
``Large.written`` has it done in a body process (the body read into the canonical call
and written by the route's ``Codec``, ``dialects/outbound.py``, or as an OpenAI chat
body), once per codec and call, at the attempt that needs it (failover may pick a
channel of another dialect), and hands the adapter the ``ChatCall`` carrying its
upstream's body already written (``ChatCall.translated`` or ``chat_body``), so the
serving process never decodes it. A Responses body read apart (``responses_apart.py``)
is translated the same way, from the chat body written there.

The process that read a body keeps it (``keep``, for ``KEPT_SECONDS``, one body a
process) and the call's first translation asks for that process (``BodyPool.placed``):
when it is free the body is translated there as it was read (``translate_kept``), not
sent and decoded again; else, and for a later translation, from the bytes. Messages
that are all a user's plain texts are written straight through
(``dialects/straight.py``), without a canonical object per message.

Everything that crosses to a body process is a module-level function and plain values.
"""

from __future__ import annotations

import dataclasses
import gc
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Literal, TypeVar

import orjson

from parley.api.body import decode_with_texts
from parley.api.chat_request import Images, parse_chat_apart
from parley.api.messages_request import MessagesRequest, parse_count, parse_messages
from parley.api.refusal import Refusal
from parley.api.textgen import TextRequest
from parley.dialects.call import ANTHROPIC_MESSAGES, OPENAI_CHAT, ChatCall, Dialect
from parley.dialects.canonical import Unsupported
from parley.dialects.outbound import DECODERS, Codec, Translated, chat_body, translate
from parley.dialects.straight import Plain, marked_messages, plain_texts, straight
from parley.domain.value import value
from parley.domain.wire import JSON
from parley.errors import InvalidRequest, ParleyError
from parley.providers.base import Target, Translations
from parley.providers.openai.adapter import TIERED_TYPE
from parley.runtime.body_pool import BodyPool

T = TypeVar("T")
Source = Literal["chat", "messages"]
"""The dialect of a body to translate: an OpenAI chat body, or a Messages body."""
SOURCES: dict[Source, Dialect] = {"chat": OPENAI_CHAT, "messages": ANTHROPIC_MESSAGES}
BULK_BYTES = 64 * 1024
"""A top-level array larger than this, serialized, comes back from a body process as
its bytes; a smaller value comes back as objects (cheap, and readable here)."""


@value
class Split:
    """A JSON object in two parts: ``small`` holds its values (``None`` where a large
    array was), ``bulk`` each large array's bytes, by name."""

    small: JSON
    bulk: dict[str, bytes]


def split(body: JSON, always: str | None = None, texts_up_to: int = 0) -> Split:
    """``body`` with each top-level array over ``BULK_BYTES`` (and ``always``, whatever
    its size) serialized, except an array of at most ``texts_up_to`` strings: a few
    strings, however long, cost the serving process next to nothing to take back as
    objects, and an adapter that reads them (an embeddings upstream that takes texts, a
    completion upstream that takes one prompt) finds them as it would in a small body."""
    small: JSON = {}
    bulk: dict[str, bytes] = {}
    for name, item in body.items():
        small[name] = item
        if type(item) is list:
            if len(item) <= texts_up_to and all(type(text) is str for text in item):
                continue
            written = orjson.dumps(item)
            if name == always or len(written) > BULK_BYTES:
                bulk[name] = written
                small[name] = None
    return Split(small, bulk)


def joined(parts: Split) -> JSON:
    """The object again, each serialized array as an ``orjson.Fragment``, in its place."""
    bulk = parts.bulk
    return {
        name: orjson.Fragment(bulk[name]) if name in bulk else item
        for name, item in parts.small.items()
    }


@value
class ChatRead:
    """A chat body read in a body process: the request (its ``body`` empty: ``body``
    has it) and what its images are to a model."""

    text: TextRequest
    body: Split
    images: Images


@value
class MessagesRead:
    """A Messages body read in a body process: the request (its ``body`` empty)."""

    messages: MessagesRequest
    body: Split


@value
class Made:
    """A body translated in a body process: the upstream's body, and whether its JSON
    output rides in Bedrock's forced tool."""

    body: Split
    json_tool: bool


KEPT_SECONDS = 2.0
"""How long a body process keeps a body it read for the call's translation: the
serving process asks for it as soon as the call is admitted and routed (a body not
translated, passed through or refused, is dropped when this runs out, or when the
process reads the next body)."""
_kept: dict[str, tuple[JSON, Plain | None]] = {}
"""In a body process: the body it read last (one at most) and its plain texts (when
its messages are a user's plain texts), by its call's token."""
_expiry: list[threading.Timer] = []


def keep(token: str, body: JSON, plain: Plain | None) -> None:
    """Keep ``body`` (and its ``plain`` texts) in this body process for ``KEPT_SECONDS``
    (``translate_kept`` takes it), in place of any body kept before: one body a process,
    however many calls.

    A kept body's objects are frozen (``gc.freeze``) while it is kept: millions of them,
    which the cyclic collector would otherwise walk as soon as it runs again, to find
    nothing (a body holds no cycles, and is freed by its counts when dropped)."""
    for timer in _expiry:
        timer.cancel()
    _expiry.clear()
    _kept.clear()
    _kept[token] = (body, plain)
    gc.freeze()
    timer = threading.Timer(KEPT_SECONDS, _dropped, (token,))
    timer.daemon = True
    timer.start()
    _expiry.append(timer)


def _dropped(token: str) -> tuple[JSON, Plain | None] | None:
    """The body kept under ``token``, kept no more (``None`` when none is); what was
    frozen with it is the collector's again."""
    kept = _kept.pop(token, None)
    gc.unfreeze()
    return kept


def read_chat_apart(raw: bytes, max_image_bytes: int, token: str = "") -> ChatRead | Refusal:
    """The chat body read as ``create_chat_completion`` reads a small one (and kept
    under ``token``, when given, for its translation)."""
    try:
        body, plain = decode_with_texts(raw, "messages")
        texts = None if plain is None else plain.texts
        text, images = parse_chat_apart(body, len(raw), max_image_bytes, texts)
    except ParleyError as error:
        return Refusal.of(error)
    if token:
        keep(token, body, plain)
    return ChatRead(dataclasses.replace(text, body={}), split(body, "messages"), images)


def read_messages_apart(
    raw: bytes, beta: str | None, counting: bool, token: str = ""
) -> MessagesRead | Refusal:
    """The Messages body read as ``create_message`` (or, ``counting``, ``count_tokens``)
    reads a small one (and kept under ``token``, when given, for its translation)."""
    try:
        body, plain = decode_with_texts(raw, "messages")
        texts = None if plain is None else plain.texts
        if counting:
            read = parse_count(body, beta, texts)
        else:
            read = parse_messages(body, beta, len(raw), texts)
    except ParleyError as error:
        return Refusal.of(error)
    if token:
        keep(token, body, plain)
    return MessagesRead(dataclasses.replace(read, body={}), split(body, "messages"))


def translate_apart(
    raw: bytes, source: Source, codec: Codec | None, tiered: bool
) -> Made | Refusal:
    """The body ``raw`` written for an upstream: read in its ``source`` dialect into the
    canonical call and written by ``codec`` (``outbound.translate``), or, with no codec,
    as an OpenAI chat body (a Messages body's, ``outbound.chat_body``; its service tier
    asked for when ``tiered``). The model is left empty (the route's is set at the call).
    ``raw`` was read (and checked) already, by a body process or, for a Responses body's
    chat body, made by one."""
    body = orjson.loads(raw)  # read and checked before
    return _translated(body, plain_texts(body.get("messages"), "text"), source, codec, tiered)


def translate_kept(
    token: str, source: Source, codec: Codec | None, tiered: bool
) -> Made | Refusal | None:
    """``translate_apart`` of the body this process keeps under ``token`` (read here by
    ``read_*_apart``, and not read again); ``None`` when it keeps none (another process
    read it, or its time ran out)."""
    kept = _dropped(token)
    if kept is None:
        return None
    body, plain = kept
    return _translated(body, plain, source, codec, tiered)


def _translated(
    body: JSON, plain: Plain | None, source: Source, codec: Codec | None, tiered: bool
) -> Made | Refusal:
    """The body written for ``codec`` (``translate_apart``): its messages straight
    through when they are all a user's ``plain`` texts (``dialects/straight.py``), else
    each read into the canonical call and written from it."""
    try:
        if plain is not None:
            marked = {**body, "messages": marked_messages(plain.block)}
            payload, json_tool = _written(marked, source, codec, tiered)
            written = straight(payload, plain.texts)
            if written is not None:
                name, value = written
                parts = split({**payload, name: None})
                return Made(Split(parts.small, {**parts.bulk, name: value}), json_tool)
        payload, json_tool = _written(body, source, codec, tiered)
    except Unsupported as error:
        return Refusal(InvalidRequest, error.message, error.param, None)
    except ParleyError as error:
        return Refusal.of(error)
    return Made(split(payload), json_tool)


def _written(body: JSON, source: Source, codec: Codec | None, tiered: bool) -> tuple[JSON, bool]:
    dialect = SOURCES[source]
    if codec is None:
        return chat_body(DECODERS[dialect](body), "", tiered), False
    return translate(body, dialect, codec)


async def read_chat(
    raw: bytes, group_id: int, bodies: BodyPool, max_image_bytes: int
) -> tuple[TextRequest, Images, Large]:
    """A large chat body, read in a body process in the group's turn (and kept there
    for its translation)."""
    token = secrets.token_hex(16)
    where, read = await bodies.placed(group_id, None, read_chat_apart, raw, max_image_bytes, token)
    if isinstance(read, Refusal):
        raise read.error()
    text = dataclasses.replace(read.text, body=joined(read.body))
    return text, read.images, Large(raw, "chat", group_id, bodies, Kept(token, where))


async def read_messages(
    raw: bytes, group_id: int, bodies: BodyPool, beta: str | None, *, counting: bool = False
) -> tuple[MessagesRequest, Large]:
    """A large Messages body, read in a body process in the group's turn (and, unless
    only ``counting``, kept there for its translation)."""
    token = "" if counting else secrets.token_hex(16)
    where, read = await bodies.placed(
        group_id, None, read_messages_apart, raw, beta, counting, token
    )
    if isinstance(read, Refusal):
        raise read.error()
    messages = dataclasses.replace(read.messages, body=joined(read.body))
    return messages, Large(raw, "messages", group_id, bodies, Kept(token, where))


@value
class Kept:
    """Where a body process keeps a body it read: its call's token, and the process."""

    token: str
    where: int


class Large:
    """A large body's bytes, kept for the attempts that need it translated: each
    translation is made once a call, in a body process in the group's turn. The first
    is made from the body the process that read it ``kept``, when that process is free
    and still keeps it (it is not read twice), the others from the bytes."""

    __slots__ = ("_bodies", "_group", "_kept", "_made", "_raw", "_source")

    def __init__(
        self,
        raw: bytes,
        source: Source,
        group_id: int,
        bodies: BodyPool,
        kept: Kept | None = None,
    ) -> None:
        self._raw = raw
        self._source = source
        self._group = group_id
        self._bodies = bodies
        self._kept = kept
        self._made: dict[tuple[Codec | None, bool], Made | Refusal] = {}

    async def _made_for(self, codec: Codec | None, tiered: bool) -> Made:
        key = (codec, tiered)
        made = self._made.get(key)
        if made is None:
            made = await self._make(codec, tiered)
            self._made[key] = made
        if isinstance(made, Refusal):
            raise made.error()
        return made

    async def _make(self, codec: Codec | None, tiered: bool) -> Made | Refusal:
        kept, self._kept = self._kept, None  # a process keeps a body for one translation
        bodies, group, source = self._bodies, self._group, self._source
        if kept is not None and kept.token:
            _, made = await bodies.placed(
                group, kept.where, translate_kept, kept.token, source, codec, tiered
            )
            if made is not None:
                return made
        return await bodies.run(group, translate_apart, self._raw, source, codec, tiered)

    async def translated(self, codec: Codec) -> Translated:
        """The call written for ``codec``'s upstream, its model left empty (the adapter
        sets the route's). A refusal is raised as a small body's would be."""
        made = await self._made_for(codec, False)
        return Translated(codec, joined(made.body), made.json_tool)

    async def chat_body(self, model: str, *, tiered: bool) -> JSON:
        """A Messages body as an OpenAI chat body for ``model`` (its service tier asked
        for when ``tiered``)."""
        body = joined((await self._made_for(None, tiered)).body)
        body["model"] = model
        return body

    async def written(self, call: ChatCall, codec: Codec | None, target: Target) -> ChatCall:
        """``call`` for one attempt on ``target``, carrying its upstream's body written
        here: for ``codec``, or (no codec: an OpenAI chat upstream) as a chat body."""
        if codec is not None:
            return call.written(translated=await self.translated(codec))
        tiered = target.type_name == TIERED_TYPE
        return call.written(chat_body=await self.chat_body(target.model, tiered=tiered))


class Later(AbstractAsyncContextManager[AsyncIterator[Sequence[T]]]):
    """A route's stream opened once its call is written (in a body process): the call
    awaited first, then the adapter's stream (``open``) entered with it."""

    __slots__ = ("_body", "_open", "_opened")

    def __init__(
        self, body: Callable[[], Awaitable[ChatCall]], open: Callable[[ChatCall], Translations[T]]
    ) -> None:
        self._body = body
        self._open = open
        self._opened: Translations[T] | None = None

    async def __aenter__(self) -> AsyncIterator[Sequence[T]]:
        opened = self._opened = self._open(await self._body())
        return await opened.__aenter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        opened = self._opened
        if opened is None:
            return False
        return await opened.__aexit__(kind, error, traceback)
