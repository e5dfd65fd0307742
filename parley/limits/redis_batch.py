"""The limiter's script calls issued within one turn of the event loop, sent to Redis
as one pipeline: one write, the replies read in order.

Each round trip costs CPU (a write, a read, waking the caller), and the limiter sends
one or two script calls a call: sent one by one at full rate they would cost more than
the rest of the call. A pipeline here is not a transaction: each ``EVALSHA`` still runs
atomically on its own, exactly as when it was sent alone, so each call is still checked
against its buckets as one step; only the round trips are shared.

A reply that is an error fails only its own call. A failure of the pipeline (Redis away,
a timeout) fails every call in it with that error, which the ``FailoverLimiter`` sees as
before. ``NOSCRIPT`` (Redis restarted, or its scripts flushed) is answered by sending
those calls again with the script itself (``EVAL``, which also loads it), as one more
pipeline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from parley.resp import Arg, NoScript, RedisClient, Script

Call = tuple[Script, Sequence[str], Sequence[Arg], "asyncio.Future[Any]"]


class ScriptBatcher:
    def __init__(self, client: RedisClient) -> None:
        self._client = client
        self._pending: list[Call] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, script: Script, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """The script's reply; sent with every other call made in this turn of the loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._send)
        self._pending.append((script, keys, args, future))
        return await future

    def _send(self) -> None:
        batch, self._pending = self._pending, []
        task = asyncio.get_running_loop().create_task(self._pipeline(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _pipeline(self, batch: list[Call]) -> None:
        try:
            replies = await self._client.pipeline(
                [script.evalsha(keys, args) for script, keys, args, _ in batch]
            )
        except BaseException as error:
            _fail(batch, error)
            if not isinstance(error, Exception):
                raise
            return
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScript)]
        if missing:
            again = [batch[i] for i in missing]
            try:
                loaded = await self._client.pipeline([s.eval(k, a) for s, k, a, _ in again])
            except Exception as error:
                loaded = [error] * len(missing)  # handed to the calls that made them
            for i, reply in zip(missing, loaded, strict=True):
                replies[i] = reply
        for (*_, future), reply in zip(batch, replies, strict=True):
            if future.done():
                continue  # the call was cancelled meanwhile
            if isinstance(reply, Exception):
                future.set_exception(reply)  # an error reply fails its own call only
            else:
                future.set_result(reply)

    async def close(self) -> None:
        """Wait for the pipelines on their way."""
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)


def _fail(batch: list[Call], error: BaseException) -> None:
    for *_, future in batch:
        if not future.done():
            future.set_exception(error)
