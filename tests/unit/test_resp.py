"""Parley's own Redis client (``parley/resp.py``): the reply parser on bytes cut anywhere,
the client against the suite's real Redis (``tests/services.py``) and a private
``redis-server`` with a password, and, for the failures, a tiny TCP server of the test's
own that speaks RESP bytes on a real socket and misbehaves on cue."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop

from parley.resp import (
    Address,
    ClientClosed,
    NoScript,
    RedisClient,
    RedisRefused,
    RedisReplyError,
    RedisTimeout,
    RedisUnavailable,
    RespParser,
    encode,
)
from parley.settings import ConfigError, load_settings
from tests.services import REDIS_URL, redis_unreachable

REPLIES = [
    (b"+OK\r\n", "OK"),
    (b"-ERR wrong number of arguments\r\n", RedisReplyError("ERR wrong number of arguments")),
    (b"-NOSCRIPT No matching script\r\n", NoScript("NOSCRIPT No matching script")),
    (b":0\r\n", 0),
    (b":-42\r\n", -42),
    (b"$5\r\nhello\r\n", b"hello"),
    (b"$0\r\n\r\n", b""),
    (b"$6\r\na\r\nb\r\n\r\n", b"a\r\nb\r\n"),  # CR LF inside a bulk string
    (b"$-1\r\n", None),
    (b"*-1\r\n", None),
    (b"*0\r\n", []),
    (
        b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n*1\r\n$-1\r\n+x\r\n",
        [1, [b"a", [None]], "x"],
    ),
    (b"*2\r\n-ERR inside\r\n:7\r\n", [RedisReplyError("ERR inside"), 7]),
]
STREAM = b"".join(raw for raw, _ in REPLIES)


def same(got: Any, want: Any) -> bool:
    """Equal, comparing errors by type and message."""
    if isinstance(want, Exception):
        return type(got) is type(want) and str(got) == str(want)
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want, strict=True))
        )
    return type(got) is type(want) and bool(got == want)


def assert_replies(got: list[Any]) -> None:
    assert len(got) == len(REPLIES)
    for reply, (raw, want) in zip(got, REPLIES, strict=True):
        assert same(reply, want), (raw, reply)


# The parser


def test_every_kind_of_reply_in_one_piece() -> None:
    assert_replies(RespParser().feed(STREAM))


def test_replies_cut_at_every_byte() -> None:
    for cut in range(1, len(STREAM)):
        parser = RespParser()
        assert_replies(parser.feed(STREAM[:cut]) + parser.feed(STREAM[cut:]))


def test_replies_one_byte_at_a_time() -> None:
    parser = RespParser()
    got = []
    for i in range(len(STREAM)):
        got += parser.feed(STREAM[i : i + 1])
    assert_replies(got)


def test_a_reply_not_yet_whole_waits() -> None:
    parser = RespParser()
    assert parser.feed(b"*2\r\n$3\r\nab") == []
    assert parser.feed(b"c\r\n") == []
    assert parser.feed(b":1\r\n+PONG\r\n") == [[b"abc", 1], "PONG"]


def test_commands_are_arrays_of_bulk_strings() -> None:
    assert encode(("SET", b"k\r\n", 12, 0.5, "é")) == (
        b"*5\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$2\r\n12\r\n$3\r\n0.5\r\n$2\r\n\xc3\xa9\r\n"
    )


# Addresses


def test_urls_give_the_address_database_and_credentials() -> None:
    address = Address.from_url("redis://user:p%40ss@redis.example:6380/3")
    assert (address.host, address.port, address.db) == ("redis.example", 6380, 3)
    assert address.handshake() == [("AUTH", "user", "p@ss"), ("SELECT", 3)]
    assert Address.from_url("redis://:secret@h").handshake() == [("AUTH", "secret")]
    assert Address.from_url("redis://h?db=2").db == 2
    assert Address.from_url("redis://127.0.0.1:6379/0").handshake() == []
    unix = Address.from_url("unix://:pw@/run/redis.sock?db=4")
    assert (unix.path, unix.db, unix.where) == ("/run/redis.sock", 4, "/run/redis.sock")
    tls = Address.from_url("rediss://h:6390/1?ssl_cert_reqs=none")
    assert tls.ssl is not None and not tls.ssl.check_hostname
    assert Address.from_url("redis://h").ssl is None


@pytest.mark.parametrize(
    "url",
    [
        "http://user:hunter2@h/0",
        "redis://user:hunter2@h/zero",
        "redis://user:hunter2@h:port/0",
        "redis://user:hunter2@h/0?socket_timeout=5",
    ],
)
def test_a_bad_url_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(ValueError) as refused:
        Address.from_url(url)
    assert "hunter2" not in str(refused.value)


def test_the_settings_refuse_a_url_the_client_cannot_use(tmp_path: Path) -> None:
    config = tmp_path / "parley.yaml"
    config.write_text("redis:\n  url: redis://:hunter2@h:6379/0?socket_timeout=5\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config, {})
    assert "redis.url: unknown Redis URL option(s): socket_timeout" in str(refused.value)
    assert "hunter2" not in str(refused.value)


# Against the suite's Redis


@pytest.fixture
async def client() -> AsyncIterator[RedisClient]:
    if (why := redis_unreachable()) is not None:
        pytest.skip(why)
    redis = RedisClient.from_url(REDIS_URL)
    yield redis
    await redis.aclose()


@pytest.fixture
def key() -> str:
    return f"test-resp-{uuid.uuid4().hex}"


@pytest.mark.redis
async def test_commands_and_their_replies(client: RedisClient, key: str) -> None:
    try:
        assert await client.call("PING") == "PONG"
        assert await client.call("GET", key) is None
        assert await client.call("SET", key, "v", "NX", "PX", 10_000) == "OK"
        assert await client.call("SET", key, "w", "NX", "PX", 10_000) is None
        assert 9_000 < await client.call("PTTL", key) <= 10_000
        with pytest.raises(RedisReplyError, match="not an integer"):
            await client.call("INCR", key)
        assert await client.call("GET", key) == b"v", "an error reply leaves the connection"
        await client.call("DEL", key)
        await client.call("HSET", key, "a", "1", "b", "2")
        assert await client.call("HGETALL", key) == [b"a", b"1", b"b", b"2"]
        nested = await client.call("EVAL", "return {1, {'x', {2}}, false}", 0)
        assert nested == [1, [b"x", [2]], None]
    finally:
        await client.call("DEL", key)


@pytest.mark.redis
async def test_a_pipeline_returns_error_replies_in_place(client: RedisClient, key: str) -> None:
    try:
        replies = await client.pipeline(
            [("SET", key, "x"), ("INCR", key), ("GET", key), ("EVALSHA", "0" * 40, 0)]
        )
        assert replies[0] == "OK" and replies[2] == b"x"
        assert isinstance(replies[1], RedisReplyError)
        assert isinstance(replies[3], NoScript)
        assert await client.pipeline([]) == []
    finally:
        await client.call("DEL", key)


@pytest.mark.redis
async def test_a_transaction_runs_its_commands_together(client: RedisClient, key: str) -> None:
    try:
        assert await client.transaction(
            [("HSET", key, "f", "1"), ("EXPIRE", key, 100), ("PUBLISH", key, "v")]
        ) == [1, 1, 0]
        with pytest.raises(RedisReplyError):  # not queued: the transaction is aborted
            await client.transaction([("HSET", key, "g", "2"), ("NOSUCHCOMMAND",)])
        assert await client.call("HGETALL", key) == [b"f", b"1"]
        with pytest.raises(RedisReplyError):  # run, and failed: raised too
            await client.transaction([("INCR", key)])
    finally:
        await client.call("DEL", key)


async def concurrent_callers(client: RedisClient) -> None:
    """Many callers at once on one connection, single commands and pipelines mixed: each
    gets its own replies."""

    async def one(i: int) -> None:
        if i % 3:
            assert await client.call("ECHO", f"c{i}") == f"c{i}".encode()
        else:
            assert await client.pipeline([("ECHO", f"p{i}"), ("ECHO", i)]) == [
                f"p{i}".encode(),
                str(i).encode(),
            ]

    await asyncio.gather(*(one(i) for i in range(300)))


@pytest.mark.redis
async def test_concurrent_callers_get_their_own_replies(client: RedisClient) -> None:
    await concurrent_callers(client)


@pytest.mark.redis
def test_concurrent_callers_on_uvloop() -> None:
    if (why := redis_unreachable()) is not None:
        pytest.skip(why)

    async def main() -> None:
        client = RedisClient.from_url(REDIS_URL)
        try:
            await concurrent_callers(client)
        finally:
            await client.aclose()

    uvloop.run(main())


@pytest.mark.redis
async def test_a_script_redis_lacks_is_sent_whole(client: RedisClient) -> None:
    script = client.script(f"-- {uuid.uuid4().hex}\nreturn ARGV[1] + KEYS[1]")
    assert await client.call("SCRIPT", "EXISTS", script.sha) == [0]
    assert await script(["2"], [40]) == 42  # EVALSHA, NOSCRIPT, then EVAL
    assert await client.call("SCRIPT", "EXISTS", script.sha) == [1]
    assert await script(["1"], [1]) == 2


@pytest.mark.redis
async def test_the_url_chooses_the_database(key: str) -> None:
    if (why := redis_unreachable()) is not None:
        pytest.skip(why)
    base = REDIS_URL.rsplit("/", 1)[0]
    five, zero = RedisClient.from_url(f"{base}/5"), RedisClient.from_url(f"{base}/0")
    try:
        await five.call("SET", key, "in five", "PX", 10_000)
        assert await zero.call("GET", key) is None
        assert await five.call("GET", key) == b"in five"
    finally:
        await five.call("DEL", key)
        await five.aclose()
        await zero.aclose()


@pytest.mark.redis
async def test_a_subscription_gets_what_is_published(client: RedisClient, key: str) -> None:
    pubsub = client.pubsub()
    try:
        await pubsub.subscribe(key)
        assert await pubsub.get_message(0.05) is None
        await client.call("PUBLISH", key, "one")
        await client.call("PUBLISH", key, "two")
        assert await pubsub.get_message(1.0) == b"one"
        assert await pubsub.get_message(1.0) == b"two"
    finally:
        await pubsub.aclose()


# A private redis-server with a password


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A redis-server of the test's own: password ``s3cret``, on a port and a socket."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port, path = free_port(), tmp_path / "redis.sock"
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1"]
    command += ["--unixsocket", str(path), "--requirepass", "s3cret"]
    command += ["--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not path.exists():
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.02)
        yield port, path
    finally:
        process.kill()
        process.wait(timeout=10)


async def test_the_url_signs_in(locked_redis: tuple[int, Path]) -> None:
    port, path = locked_redis
    for url in (
        f"redis://:s3cret@127.0.0.1:{port}/2",
        f"redis://default:s3cret@127.0.0.1:{port}/2",
        f"unix://:s3cret@{path}?db=2",
    ):
        client = RedisClient.from_url(url)
        try:
            await client.call("SET", "k", url)
            assert await client.call("GET", "k") == url.encode()
            assert await client.call("CLIENT", "INFO") is not None
        finally:
            await client.aclose()
    assert b" db=2 " in await RedisClient.from_url(f"unix://:s3cret@{path}?db=2").call(
        "CLIENT", "INFO"
    )


async def test_a_wrong_password_is_unavailable_and_never_shown(
    locked_redis: tuple[int, Path],
) -> None:
    port, _ = locked_redis
    client = RedisClient.from_url(f"redis://:hunter2@127.0.0.1:{port}/0")
    with pytest.raises(RedisUnavailable) as refused:
        await client.call("PING")
    assert "hunter2" not in str(refused.value)
    assert f"127.0.0.1:{port}" in str(refused.value)
    await client.aclose()
    unsigned = RedisClient.from_url(f"redis://127.0.0.1:{port}/0")
    with pytest.raises(RedisRefused, match="NOAUTH"):  # an outage to the limiter
        await unsigned.call("PING")
    [reply] = await unsigned.pipeline([("PING",)])
    assert isinstance(reply, RedisRefused)
    await unsigned.aclose()


async def test_a_refused_connection_never_shows_the_password() -> None:
    client = RedisClient.from_url(f"redis://:hunter2@127.0.0.1:{free_port()}/0")
    with pytest.raises(RedisUnavailable) as refused:
        await client.call("PING")
    assert "hunter2" not in str(refused.value)
    assert "hunter2" not in repr(refused.value)


# A fake server, for the failures

Behaviour = Callable[[int, bytes, asyncio.StreamWriter], Awaitable[None]]
"""What the fake server does with the ``n``-th connection's bytes as they come."""


class FakeRedis:
    """A TCP server on 127.0.0.1 that hands what each connection sends to ``behaviour``
    (connection number, bytes, writer); counts connections and keeps what was sent."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self.sent = bytearray()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> FakeRedis:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"redis://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/0"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        self._writers.append(writer)
        while data := await reader.read(65536):
            self.sent += data
            await self.behaviour(number, data, writer)
            if writer.is_closing():
                return


def pongs(data: bytes) -> bytes:
    """One ``+PONG`` a command in ``data`` (each command an array)."""
    return b"+PONG\r\n" * data.count(b"*")


async def test_a_connection_dropped_mid_reply_fails_every_caller_and_recovers() -> None:
    healthy = False

    async def behaviour(number: int, data: bytes, writer: asyncio.StreamWriter) -> None:
        if healthy:
            writer.write(pongs(data))
        else:
            writer.write(b"+PO")  # half a reply, then the line goes
            writer.transport.abort()

    async with FakeRedis(behaviour) as server:
        client = RedisClient.from_url(server.url, timeout=5)
        async with asyncio.timeout(2):  # never a hang
            results = await asyncio.gather(
                *(client.call("PING") for _ in range(5)), return_exceptions=True
            )
        assert all(isinstance(r, RedisUnavailable) for r in results), results
        assert not any(isinstance(r, RedisTimeout) for r in results)
        assert server.connections == 2, "sent once more on a new connection, no more"
        healthy = True
        assert await client.call("PING") == "PONG"
        assert await client.pipeline([("PING",), ("PING",)]) == ["PONG", "PONG"]
        assert server.connections == 3
        await client.aclose()


async def test_a_connection_closed_while_idle_is_replaced_at_once() -> None:
    async def behaviour(number: int, data: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(pongs(data))
        await writer.drain()
        writer.close()  # a restart, or an idle timeout on the server

    async with FakeRedis(behaviour) as server:
        client = RedisClient.from_url(server.url)
        for _ in range(3):
            assert await client.call("PING") == "PONG"
        assert server.connections == 3
        await client.aclose()


async def test_a_silent_server_times_out_once_and_is_not_asked_again() -> None:
    async def behaviour(number: int, data: bytes, writer: asyncio.StreamWriter) -> None:
        return None  # a hung Redis: the connection is open, nothing is answered

    async with FakeRedis(behaviour) as server:
        client = RedisClient.from_url(server.url, timeout=0.2)
        started = time.monotonic()
        results = await asyncio.gather(
            client.call("PING"), client.pipeline([("PING",)]), return_exceptions=True
        )
        waited = time.monotonic() - started
        assert all(isinstance(r, RedisTimeout) for r in results), results
        assert 0.15 < waited < 1.0
        assert server.connections == 1, "a timeout is not retried"
        assert server.sent.count(b"PING") == 2
        await client.aclose()


async def test_a_slow_reply_within_the_timeout_is_waited_for() -> None:
    async def behaviour(number: int, data: bytes, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.15)
        writer.write(pongs(data))

    async with FakeRedis(behaviour) as server:
        client = RedisClient.from_url(server.url, timeout=0.5)
        assert await client.call("PING") == "PONG"
        await asyncio.sleep(0.6)  # idle longer than the timeout: nothing awaited, no harm
        assert await client.call("PING") == "PONG"
        assert server.connections == 1
        await client.aclose()


async def test_the_handshake_signs_in_and_chooses_the_database_first() -> None:
    async def behaviour(number: int, data: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"+OK\r\n" * data.count(b"*"))

    async with FakeRedis(behaviour) as server:
        url = server.url.replace("redis://", "redis://ann:p%40ss@").replace("/0", "/7")
        client = RedisClient.from_url(url)
        assert await client.call("SET", "k", "v") == "OK"
        assert bytes(server.sent).startswith(
            encode(("AUTH", "ann", "p@ss")) + encode(("SELECT", 7)) + encode(("SET", "k", "v"))
        )
        await client.aclose()


async def test_a_malformed_reply_is_a_lost_connection() -> None:
    async def behaviour(number: int, data: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"?what\r\n")

    async with FakeRedis(behaviour) as server:
        client = RedisClient.from_url(server.url)
        with pytest.raises(RedisUnavailable, match="malformed"):
            await client.call("PING")
        await client.aclose()


async def test_a_lost_subscription_is_raised() -> None:
    async def behaviour(number: int, data: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n")
        writer.write(b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n")
        await writer.drain()
        writer.close()

    async with FakeRedis(behaviour) as server:
        pubsub = RedisClient.from_url(server.url).pubsub()
        await pubsub.subscribe("ch")
        assert await pubsub.get_message(1.0) == b"hi"
        with pytest.raises(RedisUnavailable):
            await pubsub.get_message(1.0)
        await pubsub.aclose()


async def test_closing_while_connecting_fails_the_callers_cleanly() -> None:
    signing_in = asyncio.Event()

    async def behaviour(number: int, data: bytes, writer: asyncio.StreamWriter) -> None:
        signing_in.set()  # and never answers: the connect is still under way

    async with FakeRedis(behaviour) as server:
        client = RedisClient.from_url(server.url.replace("redis://", "redis://:pw@"))
        calls = [asyncio.ensure_future(client.call("PING")) for _ in range(3)]
        await signing_in.wait()
        await client.aclose()
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, ClientClosed) for r in results), results
        assert server.connections == 1, "not sent again"
