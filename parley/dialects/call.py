"""The canonical call: what a generation job hands a provider adapter, and the one rule
that says whether it is passed through or translated.

A caller speaks a ``Dialect`` (``api/<dialect>`` reads its body), and so does each
channel's upstream (its adapter says which, per target: ``Chat.speaks`` in
``providers/base.py``). ``passes_through`` is the only place that compares the two:
when the upstream speaks the caller's dialect, the caller's body goes on as it came
(unknown fields kept: a same-dialect pass-through is a relay, not a translation), and
the reply comes back in the caller's dialect; otherwise the call is translated once,
from the canonical ``Request`` (``canonical.py``) into the upstream's dialect, and its
reply comes back as a canonical ``Reply``. A stream passed through is the upstream's
bytes fed to the caller dialect's relay (``OpenAIRelay``, ``MessagesRelay``,
``ResponsesRelay``); a stream translated is read into the canonical chunk stream (OpenAI
``chat.completion.chunk`` objects, ``translator.ChunkTranslator``) and rendered by the
caller dialect's renderer.

``ChatCall`` is what a translation is given: the caller's body as sent, and the
``Request`` read from it on first use. A pass-through is given the caller's dialect and
body alone (``Chat.relay``), so the commonest call (chat to an OpenAI-compatible
upstream) builds neither. A large body (over ``server.large_body_bytes``) is never
decoded in the serving process at all: its translation is written in a body process
(``api/apart.py``), once per upstream codec, and the call carries it written
(``translated`` for a ``Codec``, ``chat_body`` for an OpenAI chat upstream), which the
adapter sends instead of writing ``request`` (``dialects/outbound.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

from parley.dialects.bedrock_converse import StructuredOutput
from parley.dialects.canonical import Request
from parley.domain.value import value
from parley.domain.wire import JSON

Dialect = Literal[
    "openai-chat", "openai-responses", "anthropic-messages", "gemini", "bedrock-converse"
]
"""A wire format a caller or an upstream speaks."""

OPENAI_CHAT: Final = "openai-chat"
OPENAI_RESPONSES: Final = "openai-responses"
ANTHROPIC_MESSAGES: Final = "anthropic-messages"
GEMINI: Final = "gemini"
BEDROCK_CONVERSE: Final = "bedrock-converse"

Speaks = tuple[Dialect, ...]
"""The dialects one upstream speaks; the first is the one a call in any other dialect
is translated into."""


def passes_through(caller: Dialect, upstream: Speaks) -> bool:
    """Whether a call in the ``caller``'s dialect goes to an upstream that speaks
    ``upstream`` as it came (``True``), or is translated from its canonical ``Request``
    into ``upstream[0]`` (``False``). Every generation job asks this, and only this."""
    return caller in upstream


Written = Literal["anthropic", "gemini", "bedrock"]
"""An upstream dialect a call is written in by a ``Codec`` (``dialects/outbound.py``):
Messages, Gemini's, Converse."""


@value
class Codec:
    """How a canonical call is written for one kind of upstream: its dialect and what
    changes it per channel (the default ``max_tokens``, whether images may go by URL,
    how Bedrock is asked for JSON output)."""

    dialect: Written
    default_max_tokens: int = 0
    """``max_tokens`` when the caller gave none (Messages needs one)."""
    remote_images: bool = False
    """Images may go by URL (Vertex AI fetches them)."""
    structured: StructuredOutput = "native"
    """How Bedrock is asked for a ``json_schema`` (``aws.structured_output``)."""


@value
class Translated:
    """A call already written for ``codec``, in a body process: the upstream's body
    (``payload``, its model left empty, its large values as ``orjson.Fragment``) and
    whether its JSON output rides in Bedrock's forced tool."""

    codec: Codec
    payload: JSON
    json_tool: bool


class ChatCall:
    """One generation call, as the caller sent it and as the canonical call.

    ``body`` is the caller's validated body in its ``dialect``, never modified (an
    adapter copies what it changes); ``request`` is the canonical ``Request`` read from
    it, decoded once on first use (a field no canonical form holds is ``Unsupported``,
    raised there, which the adapter reports as a 400 naming it). ``beta`` is the
    caller's ``anthropic-beta`` header, which a Messages pass-through sends on.
    ``chat_body`` is the call already written as an OpenAI chat body, when its endpoint
    wrote one anyway (Responses does, once, in a body process for a large body): an
    upstream that speaks OpenAI chat is sent it instead of ``request`` written again;
    a large Messages body's is written in a body process for the route that needs it.
    ``translated`` is the call already written for an upstream of another dialect, in a
    body process, for a large body: the adapter whose codec it was written for sends it
    instead of ``request`` (``dialects.outbound.outbound``).
    """

    __slots__ = ("_decode", "_request", "beta", "body", "chat_body", "dialect", "translated")

    def __init__(
        self,
        dialect: Dialect,
        body: JSON,
        decode: Callable[[JSON], Request] | None = None,
        *,
        request: Request | None = None,
        beta: str | None = None,
        chat_body: JSON | None = None,
        translated: Translated | None = None,
    ) -> None:
        self.dialect: Dialect = dialect
        self.body = body
        self._decode = decode
        self._request = request
        self.beta = beta
        self.chat_body = chat_body
        self.translated = translated

    def written(
        self, *, chat_body: JSON | None = None, translated: Translated | None = None
    ) -> ChatCall:
        """This call for one attempt, carrying what a body process wrote for its route:
        the same body, decoder and ``Request`` (if read), and ``chat_body`` or
        ``translated`` (the call's own ``chat_body`` kept when none is given)."""
        return ChatCall(
            self.dialect,
            self.body,
            self._decode,
            request=self._request,
            beta=self.beta,
            chat_body=self.chat_body if chat_body is None else chat_body,
            translated=translated,
        )

    @property
    def request(self) -> Request:
        """The canonical call, decoded from ``body`` the first time it is asked for."""
        request = self._request
        if request is None:
            if self._decode is None:
                raise RuntimeError(f"A {self.dialect} call was given no decoder.")
            request = self._request = self._decode(self.body)
        return request
