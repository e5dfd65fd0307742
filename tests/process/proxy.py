"""A TCP proxy a test controls, to take a shared server away without touching it.

PostgreSQL and Redis on 127.0.0.1 are shared by every engineer's tests, so an outage is
never played by stopping them: the code under test talks to ``TcpProxy.port`` instead,
and the test cuts the proxy (every open connection reset, new ones refused) and restores
it (listening again on the same port), or freezes it (a hung server: connections open,
nothing answered) and thaws it. Everything clients sent through it is kept in
``sent``, and ``connections`` counts the connections opened, so a test can count the
attempts that reached the server.

It runs in the test's own event loop::

    async with TcpProxy(5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/db"
        await proxy.cut()
        await proxy.restore()
"""

from __future__ import annotations

import asyncio
import contextlib

from tests.process.procs import free_port
from tests.upstreams.server import Running

CHUNK = 65536


class TcpProxy(Running):
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.sent = bytearray()
        """Every byte clients sent towards the target, in order."""
        self.connections = 0
        """Connections clients opened through the proxy."""
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()

    async def start(self) -> None:
        await self.restore()

    async def stop(self) -> None:
        self.thaw()
        await self.cut()

    async def restore(self) -> None:
        """Listen (again) on ``port`` and forward every new connection to the target."""
        if self._server is None:
            self._server = await asyncio.start_server(
                self._forward, "127.0.0.1", self.port, reuse_address=True
            )

    def freeze(self) -> None:
        """Hold every byte from now on, both ways, on open and new connections alike: a
        hung server (connections accepted, nothing answered)."""
        self._flowing.clear()

    def thaw(self) -> None:
        """Forward again, the held bytes first."""
        self._flowing.set()

    async def cut(self) -> None:
        """Stop listening (connections are refused) and reset every open connection."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._open):
            writer.transport.abort()
        self._open.clear()
        await asyncio.sleep(0)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            target_reader, target_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._open |= {writer, target_writer}
        await asyncio.gather(
            self._pipe(reader, target_writer, record=True), self._pipe(target_reader, writer)
        )
        self._open -= {writer, target_writer}

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, record: bool = False
    ) -> None:
        try:
            while data := await reader.read(CHUNK):
                await self._flowing.wait()
                if record:
                    self.sent += data
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()
