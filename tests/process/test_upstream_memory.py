"""A hostile upstream cannot make ``parley serve`` keep its memory.

Eight replies at once whose heads are endless one-MiB header lines, then normal calls:
the process's resident memory comes back near where it was before them. Each hostile
reply is cut at the head's bound (``upstream.max_head_bytes``), and no idle connection
keeps the headers of the reply it carried.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from types import TracebackType

import orjson

from tests.http.rawserver import content_length, keep_alive_reply
from tests.process.calls import Chat, burst, gateway_config
from tests.process.procs import Processes
from tests.upstreams.completion_script import script_for, whole_reply

HOSTILE_MODEL = "chat-hostile"
HOSTILE_REPLIES = 8
LINES = 64
"""One-MiB header lines a hostile head holds (64 MiB a reply, should it be read whole)."""
NORMAL_CALLS = 100
"""Calls before the hostile replies (to warm up) and after them, one at a time: one
connection carries them, and the others stay idle, within their keep-alive."""
GROWTH_MB = 32.0


class Upstream:
    """A raw upstream in a thread of its own: a chat reply, kept alive, to any model but
    ``hostile``, which gets a head of ``LINES`` one-MiB lines (each a header of its own
    name) before it; ``lines_written`` counts the lines that reached a socket."""

    def __init__(self) -> None:
        self.lines_written = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._body = orjson.dumps(whole_reply(script_for("chat", {"messages": []}, 3, "raw")))
        self._normal = keep_alive_reply(self._body, b"Content-Type: application/json\r\n")

    def __enter__(self) -> Upstream:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        )
        self._server = started.result(timeout=5)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                body = await reader.readexactly(content_length(head))
                if b'"model":"hostile"' not in body:
                    writer.write(self._normal)
                    await writer.drain()
                    continue
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                value = b"a" * (1024 * 1024)
                for number in range(LINES):
                    writer.write(b"X-Pad-%d: %s\r\n" % (number, value))
                    await writer.drain()
                    self.lines_written += 1
                writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(self._body), self._body))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._handlers.discard(handler)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def settled_rss_mb(pid: int) -> float:
    """The resident memory once it stops falling (the allocator returns freed pages in
    its own time), at most a few seconds after the last call."""
    lowest = rss_mb(pid)
    for _ in range(20):
        time.sleep(0.25)
        now = rss_mb(pid)
        if now >= lowest - 0.5:
            return min(now, lowest)
        lowest = now
    return lowest


def test_hostile_heads_leave_the_process_near_its_baseline(
    procs: Processes, tmp_path: Path
) -> None:
    with Upstream() as upstream:
        config = gateway_config(f"http://127.0.0.1:{upstream.port}/v1", tmp_path)
        config["channels"][0]["models"].append({"name": HOSTILE_MODEL, "upstream": "hostile"})
        config["models"].append({"name": HOSTILE_MODEL, "kind": "chat"})
        server = procs.serve(config)
        key = server.create_key()
        normal = [Chat(server.v1, key)] * NORMAL_CALLS
        assert {reply.status for reply in burst(normal, concurrency=1)} == {200}
        baseline = settled_rss_mb(server.pid)

        hostile = [Chat(server.v1, key, model=HOSTILE_MODEL)] * HOSTILE_REPLIES
        replies = burst(hostile, concurrency=HOSTILE_REPLIES)
        assert {reply.status for reply in burst(normal, concurrency=1)} == {200}
        after = settled_rss_mb(server.pid)
    assert after - baseline < GROWTH_MB, (
        f"resident memory {baseline:.1f} MB before the hostile replies, {after:.1f} MB after"
    )
    assert {reply.status for reply in replies} == {502}
    assert {reply.json()["error"]["code"] for reply in replies} == {"bad_gateway"}
    assert upstream.lines_written < HOSTILE_REPLIES * LINES, "heads were cut short"
