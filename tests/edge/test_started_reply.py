"""A failure after a reply has begun never writes a second reply on the connection.

Before: the error middleware answered a handler that raised after ``prepare()`` with an
envelope, so ``HTTP/1.1 500`` appeared in the middle of the first reply's body. A handler
sends its head after ``started.note_started``; one that did not is cut all the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from parley.app import at_the_edge, create_app
from parley.edge.runner import EdgeRunner
from parley.errors import UpstreamError
from parley.pipeline.started import note_started
from parley.settings import Settings
from tests.api.harness import default_config
from tests.edge.corpus import READ_SECONDS
from tests.upstreams.openai_compatible import FakeEngine

FIRST_EVENT = b'data: {"n":1}\n\n'


async def sse_then_bug(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    note_started(request, response)
    await response.prepare(request)
    await response.write(FIRST_EVENT)
    raise RuntimeError("a bug after the stream began")


async def sse_then_parley_error(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    note_started(request, response)
    await response.prepare(request)
    await response.write(FIRST_EVENT)
    raise UpstreamError("The upstream failed mid-stream.")


async def bytes_then_bug(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "audio/wav"})
    note_started(request, response)
    await response.prepare(request)
    await response.write(b"RIFF" + bytes(100))
    raise RuntimeError("a bug after the audio began")


async def unnoted_then_bug(request: web.Request) -> web.StreamResponse:
    """A handler that sent its head without ``started.note_started``."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(FIRST_EVENT)
    raise RuntimeError("a bug after an unnoted stream began")


@pytest.fixture
async def port(tmp_path: Path) -> AsyncIterator[int]:
    """The real app, with test-only routes that fail after their reply has begun."""
    async with FakeEngine() as engine:
        app = create_app(Settings.model_validate(default_config(engine.base_url, tmp_path)))
        app.router.add_get("/test/sse-bug", at_the_edge(sse_then_bug))
        app.router.add_get("/test/sse-error", at_the_edge(sse_then_parley_error))
        app.router.add_get("/test/bytes-bug", at_the_edge(bytes_then_bug))
        app.router.add_get("/test/unnoted-bug", at_the_edge(unnoted_then_bug))
        runner = EdgeRunner(app, Settings().server, handler_cancellation=True, shutdown_timeout=1)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            yield runner.addresses[0][1]
        finally:
            await runner.cleanup()


async def raw_get(port: int, path: str) -> bytes:
    """Two requests on one keep-alive connection; everything until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET {path} HTTP/1.1\r\nHost: gw\r\n\r\n".encode()
    writer.write(request + b"GET /health HTTP/1.1\r\nHost: gw\r\n\r\n")
    received = b""
    async with asyncio.timeout(READ_SECONDS):
        try:
            while chunk := await reader.read(65536):
                received += chunk
        except ConnectionError:
            pass
    writer.close()
    return received


def chunked_body(raw: bytes) -> tuple[bytes, bool]:
    """The body of a chunked reply, and whether it ended with the terminating chunk."""
    rest = raw.partition(b"\r\n\r\n")[2]
    body = b""
    while rest:
        size_line, found, rest = rest.partition(b"\r\n")
        if not found:
            return body, False
        size = int(size_line, 16)
        if size == 0:
            return body, True
        body, rest = body + rest[:size], rest[size + 2 :]
    return body, False


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/test/sse-bug", b"The server had an error"),
        ("/test/sse-error", b"The upstream failed mid-stream."),
    ],
)
async def test_an_event_stream_that_fails_ends_with_an_error_event_and_done(
    port: int, path: str, message: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    raw = await raw_get(port, path)
    assert raw.count(b"HTTP/1.1") == 1, raw  # no second reply, and /health never answered
    body, ended = chunked_body(raw)
    assert ended
    events = body.split(b"\n\n")
    assert body.startswith(FIRST_EVENT)
    assert events[1].startswith(b'data: {"error":{') and message in events[1]
    assert body.endswith(b"data: [DONE]\n\n")
    assert any("after its reply began" in r.getMessage() for r in caplog.records)


async def test_any_other_reply_that_fails_is_cut_short(port: int) -> None:
    raw = await raw_get(port, "/test/bytes-bug")
    assert raw.count(b"HTTP/1.1") == 1, raw
    body, ended = chunked_body(raw)
    assert body.startswith(b"RIFF")
    assert not ended  # the client sees an incomplete body, never a whole one
    assert b'"error"' not in raw


async def test_a_reply_begun_without_a_note_is_cut_never_answered_twice(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    raw = await raw_get(port, "/test/unnoted-bug")
    assert raw.count(b"HTTP/1.1") == 1, raw
    body, ended = chunked_body(raw)
    assert body.startswith(FIRST_EVENT)
    assert not ended
    assert b'"error"' not in raw
    assert any("unnoted reply began" in r.getMessage() for r in caplog.records)
