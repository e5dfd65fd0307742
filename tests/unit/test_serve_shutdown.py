"""``serve``'s shutdown times the grace once: calls that finish within it finish, calls
still running at its end are ended (their handler cancelled), whatever aiohttp's own
timeout says. The runners here give aiohttp no bound at all (``shutdown_timeout=None``
waits for ever), so only ``shut_down`` can end a call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from parley.cli.serve import shut_down

HANG_GUARD = 60.0
"""Not a measurement: only stops a broken shutdown from hanging the suite."""


class Handlers:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = 0

    async def wait(self, request: web.Request) -> web.Response:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return web.Response(text="finished")


@pytest.fixture
async def served() -> AsyncIterator[tuple[web.AppRunner, Handlers, str]]:
    handlers = Handlers()
    app = web.Application()
    app.router.add_get("/", handlers.wait)
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/"
    yield runner, handlers, url
    if runner.server is not None:
        await runner.cleanup()


async def fetch(url: str) -> str:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return await response.text()


async def test_a_call_still_running_when_the_grace_ends_is_ended(
    served: tuple[web.AppRunner, Handlers, str],
) -> None:
    runner, handlers, url = served
    call = asyncio.create_task(fetch(url))
    await handlers.started.wait()

    await asyncio.wait_for(shut_down(runner, grace_seconds=0.2), HANG_GUARD)

    assert handlers.cancelled == 1
    with pytest.raises(aiohttp.ClientError):
        await call
    assert runner.server is None  # cleaned up: the app's cleanup hooks ran


async def test_a_call_that_finishes_within_the_grace_gets_its_reply(
    served: tuple[web.AppRunner, Handlers, str],
) -> None:
    runner, handlers, url = served
    call = asyncio.create_task(fetch(url))
    await handlers.started.wait()

    stopping = asyncio.create_task(shut_down(runner, grace_seconds=HANG_GUARD))
    await asyncio.sleep(0.05)
    assert not stopping.done()  # it waits for the call...
    handlers.release.set()  # ...which finishes
    assert await asyncio.wait_for(call, HANG_GUARD) == "finished"
    await asyncio.wait_for(stopping, HANG_GUARD)
    assert handlers.cancelled == 0
