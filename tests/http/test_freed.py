"""A closed upstream connection is freed by reference counting, at once: nothing in it is
left for the cyclic garbage collector (with thousands of streams closing, that garbage
pinned tens of MB of the heap until a full collection)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from parley.http.connection import Connection


@pytest.fixture
def no_cyclic_collection() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def closing_server() -> tuple[asyncio.Server, int]:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.usefixtures("no_cyclic_collection")
@pytest.mark.parametrize("who_closes", ["upstream", "parley"])
async def test_a_closed_connection_leaves_no_garbage(who_closes: str) -> None:
    server, port = await closing_server()
    loop = asyncio.get_running_loop()
    try:
        _, connection = await loop.create_connection(Connection, "127.0.0.1", port)
        if who_closes == "parley":
            connection.close()
        for _ in range(100):  # until connection_lost has run (a handful of loop turns)
            if connection.transport is None:
                break
            await asyncio.sleep(0.01)
        freed = weakref.ref(connection)
        del connection
        await asyncio.sleep(0)  # the loop lets go of its last callbacks
        await asyncio.sleep(0)
        assert freed() is None
    finally:
        server.close()
        await server.wait_closed()
