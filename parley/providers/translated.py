"""The one loop around a sans-IO stream translator: read a piece, feed it, hand on what
comes out (``parley/dialects/translator.py``).

``TranslatedStream`` is an adapter's stream on one route: entering sends the request
and checks that the upstream streams (the adapter's ``start``); the batches it gives are
what the translator made of each read, never empty. What a read produced before the
translator saw a failure is handed on first, and the failure (mapped by the adapter's
``fault``, naming only the channel; a body that ended before the stream did is one) is
raised at the next call, so a route that fails
before its first batch is fallen over, and one that fails later is told in the caller's
dialect by the job. Leaving releases the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Generic, TypeVar

from parley.dialects.translator import Failure, Translator
from parley.errors import UpstreamError
from parley.http import Reply
from parley.providers.base import upstream_errors, upstream_failure

T = TypeVar("T")

Fault = Callable[[Failure], UpstreamError]
"""The adapter's error for a failure its translator saw."""


class TranslatedStream(Generic[T]):
    """``AbstractAsyncContextManager[AsyncIterator[Sequence[T]]]`` over one upstream call."""

    __slots__ = ("_channel", "_fault", "_reply", "_send", "_start", "_translator")

    def __init__(
        self,
        channel: str,
        send: Callable[[], Awaitable[Reply]],
        start: Callable[[Reply], Awaitable[None]],
        translator: Translator[T],
        fault: Fault,
    ) -> None:
        self._channel = channel
        self._send = send
        self._start = start
        self._translator = translator
        self._fault = fault
        self._reply: Reply | None = None

    async def __aenter__(self) -> Translated[T]:
        with upstream_errors(self._channel):
            reply = self._reply = await self._send()
        try:
            with upstream_errors(self._channel):
                await self._start(reply)
        except BaseException:
            self._reply = None
            reply.release()
            raise
        return Translated(reply, self._channel, self._translator, self._fault)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        reply, self._reply = self._reply, None
        if reply is not None:
            reply.release()


class Translated(Generic[T]):
    """The batches: what the translator made of each read, until the stream ends."""

    __slots__ = ("_channel", "_end", "_fault", "_reply", "_translator")

    def __init__(self, reply: Reply, channel: str, translator: Translator[T], fault: Fault) -> None:
        self._reply = reply
        self._channel = channel
        self._translator = translator
        self._fault = fault
        self._end: UpstreamError | bool = False
        """``True`` once the stream ended; the error to raise when it failed."""

    def __aiter__(self) -> Translated[T]:
        return self

    async def __anext__(self) -> Sequence[T]:
        translator = self._translator
        while self._end is False:
            try:
                data = await self._reply.next_piece()
            except Exception as error:
                failure = upstream_failure(self._channel, error)
                if failure is None:
                    raise
                raise failure from None
            out = self._translated(translator, data)
            if out:
                return out
        self._raise_end()
        raise StopAsyncIteration

    def _translated(self, translator: Translator[T], data: bytes) -> Sequence[T]:
        """What one upstream read (empty: the body's end) becomes for the caller, noting
        the stream's end or its fault."""
        if not data:
            out = translator.end()
            cut = translator.failure  # the body ended before the stream did
            self._end = True if cut is None else self._fault(cut)
        else:
            out = translator.feed(data)
            if translator.failure is not None:
                self._end = self._fault(translator.failure)
            elif translator.done:
                self._end = True
        return out

    async def pump(
        self, render: Callable[[Sequence[T]], bytes], write: Callable[[bytes], Awaitable[None]]
    ) -> None:
        """Every batch left, each rendered and written (unless it renders empty), until the
        stream ends; raises what ``__anext__`` would. The runner's ``async for`` over the
        batches written out here: one coroutine a stream, not two a read."""
        translator, reply = self._translator, self._reply
        now, arrival, timeout = reply.piece_now, reply.arrival, reply.read_timeout
        while self._end is False:
            try:  # ``reply.next_piece()``, written out
                data = now()
                while data is None:
                    await arrival(timeout)
                    data = now()
            except Exception as error:
                failure = upstream_failure(self._channel, error)
                if failure is None:
                    raise
                raise failure from None
            out = self._translated(translator, data)
            if out:
                data = render(out)
                if data:
                    await write(data)
        self._raise_end()

    def _raise_end(self) -> None:
        """Raise the failure that ended the stream, once."""
        end = self._end
        if isinstance(end, UpstreamError):
            self._end = True
            raise end
