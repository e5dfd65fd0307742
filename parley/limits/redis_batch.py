"""The limiter's script calls issued within one turn of the event loop, sent to Redis
as one pipeline: one write, one connection taken from the pool, the replies read in
order.

redis-py spends much CPU on each command it sends alone (connection pool, retry and
observability wrappers, one socket write and one read each), and the limiter sends one or
two a call: on a worker at full rate that would cost more than the rest of the call.
A pipeline here is not a transaction: each ``EVALSHA`` still runs atomically on its own,
exactly as when it was sent alone, so each call is still checked against its buckets
as one step; only the round trips are shared.

A reply that is an error fails only its own call. A failure of the pipeline (Redis away,
a timeout) fails every call in it with that error, which the ``FailoverLimiter`` sees as
before. ``NOSCRIPT`` (Redis restarted, or its scripts flushed) is answered by sending that
call again through redis-py's ``Script``, which loads the script first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

Args = Sequence[str | int | float]
Call = tuple[AsyncScript, Sequence[str], Args, "asyncio.Future[Any]"]


class ScriptBatcher:
    def __init__(self, client: Redis) -> None:
        self._client = client
        self._pending: list[Call] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, script: AsyncScript, keys: Sequence[str], args: Args) -> Any:
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
            pipe = self._client.pipeline(transaction=False)
            for script, keys, args, _ in batch:
                pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            replies = await pipe.execute(raise_on_error=False)
        except BaseException as error:
            for *_, future in batch:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for (script, keys, args, future), sent in zip(batch, replies, strict=True):
            reply = sent
            if isinstance(sent, NoScriptError):
                try:
                    reply = await script(keys=keys, args=args)
                except Exception as error:
                    reply = error  # handed to the call that made it
            if future.done():
                continue  # the call was cancelled meanwhile
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def close(self) -> None:
        """Wait for the pipelines on their way."""
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)
