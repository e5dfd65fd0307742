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
upstream) builds neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

from parley.dialects.canonical import Request
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


class ChatCall:
    """One generation call, as the caller sent it and as the canonical call.

    ``body`` is the caller's validated body in its ``dialect``, never modified (an
    adapter copies what it changes); ``request`` is the canonical ``Request`` read from
    it, decoded once on first use (a field no canonical form holds is ``Unsupported``,
    raised there, which the adapter reports as a 400 naming it). ``beta`` is the
    caller's ``anthropic-beta`` header, which a Messages pass-through sends on.
    ``chat_body`` is the call already written as an OpenAI chat body, when its endpoint
    wrote one anyway (Responses does, once, in a body process for a large body): an
    upstream that speaks OpenAI chat is sent it instead of ``request`` written again.
    """

    __slots__ = ("_decode", "_request", "beta", "body", "chat_body", "dialect")

    def __init__(
        self,
        dialect: Dialect,
        body: JSON,
        decode: Callable[[JSON], Request] | None = None,
        *,
        request: Request | None = None,
        beta: str | None = None,
        chat_body: JSON | None = None,
    ) -> None:
        self.dialect: Dialect = dialect
        self.body = body
        self._decode = decode
        self._request = request
        self.beta = beta
        self.chat_body = chat_body

    @property
    def request(self) -> Request:
        """The canonical call, decoded from ``body`` the first time it is asked for."""
        request = self._request
        if request is None:
            if self._decode is None:
                raise RuntimeError(f"A {self.dialect} call was given no decoder.")
            request = self._request = self._decode(self.body)
        return request
