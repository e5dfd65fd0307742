"""A small asyncio Redis client: only what Parley sends, on one connection, over RESP2.

Parley talks to Redis for its shared limits (``limits/redis.py``), breakers, leases and
alert claims (``runtime/shared_breakers.py``). redis-py does all that and much more, at
several megabytes of every worker's memory and much CPU per command; this module is the
part Parley uses: commands, pipelines, a ``MULTI``/``EXEC`` transaction, Lua scripts by
SHA with a fall-back to ``EVAL``, and a subscription.

``RedisClient`` keeps one connection and pipelines every command on it: a command's bytes
are written at once and its reply awaited in order, so concurrent callers share the
connection without a pool. A pipeline (``RedisClient.pipeline``) is many commands in one
write, awaited as one. Replies are parsed as they arrive (``RespParser``, which takes a
reply cut anywhere).

Failures, and what a caller sees:

- Redis cannot be reached, or the connection drops: ``RedisUnavailable``. The command is
  sent once more, at once, on a new connection (a connection Redis dropped when it
  restarted is not an outage); the second failure is raised. A command whose reply was
  lost with the connection may have run, and then runs twice: for the limiter's
  scripts, a bucket a little emptier, never a charge (bills come from usage records).
  Nothing waits longer than ``connect_timeout`` to connect.
- No reply for ``timeout`` seconds while one is awaited: ``RedisTimeout`` (a
  ``RedisUnavailable``), never retried: a retry would wait the whole timeout again. The
  connection is closed, failing every command on it, since a reply that comes late
  would answer the wrong command.
- An error reply (``-ERR …``): ``RedisReplyError``, the connection stays. ``-NOSCRIPT``
  is ``NoScript``, which ``Script`` answers by sending the script itself. Replies that
  say Redis will not serve this client now (not signed in, still loading) are
  ``RedisRefused``, which is a ``RedisUnavailable`` too.
- ``aclose`` while a command waits for its connection: ``ClientClosed``, not sent.

The next command after a failure connects again. Messages never hold the URL or its
password: only the host and port (or socket path) Redis was sought at.

URLs: ``redis://[[user]:password@]host[:port][/db]``, ``rediss://`` (TLS; the query may
say ``ssl_cert_reqs=none|optional|required``, ``ssl_ca_certs=<file>`` and
``ssl_check_hostname=false``), ``unix://[[user]:password@]/path/to.sock``; the database
also as ``?db=N``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

if TYPE_CHECKING:
    import ssl

Arg = str | bytes | int | float
Command = Sequence[Arg]

DEFAULT_TIMEOUT = 1.0


class RedisError(Exception):
    """Anything that went wrong talking to Redis."""


class RedisUnavailable(RedisError):
    """Redis cannot be reached, or dropped the connection: an outage, not a bug."""


class RedisTimeout(RedisUnavailable):
    """Redis did not answer within the timeout (a hung server, a black-holed network)."""


class ClientClosed(RedisUnavailable):
    """The client was closed while the command waited for its connection: not sent, and
    not sent again."""


class RedisReplyError(RedisError):
    """Redis answered with an error (``-ERR …``, ``-WRONGTYPE …``)."""


class NoScript(RedisReplyError):
    """``EVALSHA`` of a script Redis does not have (it restarted, or was flushed)."""


class RedisRefused(RedisUnavailable, RedisReplyError):
    """An error reply that says Redis will not serve this client now rather than that
    the command was wrong: not signed in (``NOAUTH``, ``WRONGPASS``), or still loading its
    data (``LOADING``). An outage to the callers, as redis-py counted it."""


_REFUSALS = ("NOAUTH", "WRONGPASS", "LOADING")


# Parsing replies


class _Incomplete(Exception):
    """The buffer ends inside a reply."""


def _error(message: str) -> RedisReplyError:
    if message.startswith("NOSCRIPT"):
        return NoScript(message)
    if message.startswith(_REFUSALS):
        return RedisRefused(message)
    return RedisReplyError(message)


def _parse(buf: bytes, pos: int) -> tuple[Any, int]:
    """The reply at ``pos`` of ``buf`` and where the next begins; ``_Incomplete`` when the
    buffer ends first. An error reply is returned (not raised) as a ``RedisReplyError``."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise _Incomplete
    kind = buf[pos]
    if kind == 36:  # $ bulk string
        size = int(buf[pos + 1 : end])
        if size < 0:
            return None, end + 2
        stop = end + 2 + size
        if len(buf) < stop + 2:
            raise _Incomplete
        return buf[end + 2 : stop], stop + 2
    if kind == 58:  # : integer
        return int(buf[pos + 1 : end]), end + 2
    if kind == 42:  # * array
        count = int(buf[pos + 1 : end])
        if count < 0:
            return None, end + 2
        return _parse_array(buf, end + 2, count)
    if kind == 43:  # + simple string
        return buf[pos + 1 : end].decode(), end + 2
    if kind == 45:  # - error
        return _error(buf[pos + 1 : end].decode(errors="replace")), end + 2
    raise ValueError(f"not a RESP reply: {bytes(buf[pos : pos + 1])!r}")


def _parse_array(buf: bytes, pos: int, count: int) -> tuple[list[Any], int]:
    """``count`` replies from ``pos``: an array's items (as ``_parse``)."""
    items: list[Any] = []
    for _ in range(count):
        # bulk strings and integers inline: most of what arrays hold
        end = buf.find(b"\r\n", pos)
        if end < 0:
            raise _Incomplete
        kind = buf[pos]
        if kind == 36:  # $
            size = int(buf[pos + 1 : end])
            if size < 0:
                items.append(None)
                pos = end + 2
                continue
            stop = end + 2 + size
            if len(buf) < stop + 2:
                raise _Incomplete
            items.append(buf[end + 2 : stop])
            pos = stop + 2
        elif kind == 58:  # :
            items.append(int(buf[pos + 1 : end]))
            pos = end + 2
        else:
            item, pos = _parse(buf, pos)
            items.append(item)
    return items, pos


class RespParser:
    """Replies from bytes as they arrive, in any pieces.

    ``feed`` returns the replies the bytes completed; a reply cut short waits in the
    buffer for the rest (and is parsed again from its start then: replies are small).
    """

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf + data if self._buf else data
        replies = []
        pos, size = 0, len(buf)
        try:
            while pos < size:
                reply, pos = _parse(buf, pos)
                replies.append(reply)
        except _Incomplete:
            pass
        self._buf = buf[pos:]
        return replies


# Writing commands


def encode(command: Command) -> bytes:
    """A command as RESP: an array of bulk strings. Built as text when every argument is
    ASCII text or a number (Parley's commands: keys, numbers, script SHAs), which costs a
    third of building it from bytes."""
    pieces = [f"*{len(command)}\r\n"]
    for arg in command:
        if isinstance(arg, str):
            if not arg.isascii():
                return _encode_bytes(command)
            text = arg
        elif isinstance(arg, int) and not isinstance(arg, bool):
            text = str(arg)
        elif isinstance(arg, float):
            text = repr(arg)
        else:
            return _encode_bytes(command)
        pieces.append(f"${len(text)}\r\n{text}\r\n")
    return "".join(pieces).encode()


def _encode_bytes(command: Command) -> bytes:
    """``encode`` for any arguments: bytes, text in any script (as UTF-8), numbers."""
    out = [b"*%d\r\n" % len(command)]
    for arg in command:
        if isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, int):
            data = b"%d" % arg
        else:
            data = repr(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


# The connection


class _Pending:
    """A command sent and awaiting its reply, or a pipeline awaiting ``left`` replies
    (``replies``, None for a single command)."""

    __slots__ = ("future", "left", "replies")

    def __init__(self, future: asyncio.Future[Any], left: int, many: bool) -> None:
        self.future = future
        self.left = left
        self.replies: list[Any] | None = [] if many else None


class _Connection(asyncio.Protocol):
    """One connection to Redis: replies are matched to commands in the order sent, or,
    once ``push`` is set and no command awaits one, handed to ``push`` (a subscription's
    messages)."""

    def __init__(self, where: str, timeout: float) -> None:
        self._where = where
        self._timeout = timeout
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._parser = RespParser()
        self._pending: deque[_Pending] = deque()
        self._progress = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.push: Callable[[Any], None] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses

    def send(self, payload: bytes, replies: int = 1, *, many: bool = False) -> asyncio.Future[Any]:
        """Write ``payload``; the future gets its reply, or with ``many`` the list of its
        ``replies`` replies, or the connection's failure."""
        future = self._loop.create_future()
        if self.closed or self._transport is None:
            future.set_exception(
                RedisUnavailable(f"the connection to Redis at {self._where} is closed")
            )
            return future
        if not self._pending:
            self._progress = self._loop.time()
            if self._timer is None:
                self._timer = self._loop.call_at(self._progress + self._timeout, self._watch)
        self._pending.append(_Pending(future, replies, many))
        self._transport.write(payload)
        return future

    def data_received(self, data: bytes) -> None:
        self._progress = self._loop.time()
        try:
            replies = self._parser.feed(data)
        except (ValueError, IndexError) as error:
            self.fail(RedisUnavailable(f"Redis at {self._where} sent a malformed reply ({error})"))
            return
        pending = self._pending
        for reply in replies:
            if not pending:
                if self.push is not None:
                    self.push(reply)
                    continue
                self.fail(RedisUnavailable(f"Redis at {self._where} sent an unasked reply"))
                return
            head = pending[0]
            if head.replies is None:  # a single command: the common case
                pending.popleft()
                if not head.future.done():
                    head.future.set_result(reply)
                continue
            head.replies.append(reply)
            head.left -= 1
            if head.left == 0:
                pending.popleft()
                if not head.future.done():
                    head.future.set_result(head.replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(RedisUnavailable(f"Redis at {self._where} closed the connection"))

    def _watch(self) -> None:
        """Fail the connection when a reply is awaited and nothing came for ``timeout``."""
        self._timer = None
        if self.closed or not self._pending:
            return
        due = self._progress + self._timeout
        if self._loop.time() >= due:
            self.fail(RedisTimeout(f"Redis at {self._where} did not answer in {self._timeout:g}s"))
        else:
            self._timer = self._loop.call_at(due, self._watch)

    def fail(self, error: RedisError) -> None:
        """Close the connection; every command awaiting a reply gets ``error``."""
        if self.closed:
            return
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None:
            self._transport.abort()
        pending, self._pending = self._pending, deque()
        for entry in pending:
            if not entry.future.done():
                entry.future.set_exception(error)
        if self.push is not None:
            self.push(error)

    def close(self) -> None:
        self.fail(RedisUnavailable(f"the connection to Redis at {self._where} was closed"))


# Addresses


class Address:
    """Where Redis is and how to sign in: parsed from a URL, holding its password
    without ever showing it (``where`` is the host and port, or the socket path)."""

    __slots__ = ("db", "host", "password", "path", "port", "ssl", "username", "where")

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 6379,
        path: str | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
        ssl: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.path = path
        self.db = db
        self.username = username
        self.password = password
        self.ssl = ssl
        self.where = path if path is not None else f"{host}:{port}"

    @classmethod
    def from_url(cls, url: str) -> Address:
        """The address in a ``redis://``, ``rediss://`` or ``unix://`` URL. A ValueError
        names what is wrong, never the URL itself (it may hold a password)."""
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss", "unix"):
            raise ValueError("a Redis URL starts with redis://, rediss:// or unix://")
        options = dict(parse_qsl(parts.query))
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password is not None else None
        db_text = options.pop("db", None)
        if parts.scheme == "unix":
            if not parts.path:
                raise ValueError("a unix:// Redis URL names the socket's path")
            address = cls(path=unquote(parts.path), username=username, password=password)
        else:
            if db_text is None and parts.path.strip("/"):
                db_text = parts.path.strip("/")
            try:
                port = parts.port or 6379
            except ValueError:
                raise ValueError("the Redis URL's port is not a number") from None
            address = cls(
                host=unquote(parts.hostname) if parts.hostname else "127.0.0.1",
                port=port,
                username=username,
                password=password,
                ssl=_ssl_context(options) if parts.scheme == "rediss" else None,
            )
        if options:
            raise ValueError(f"unknown Redis URL option(s): {', '.join(sorted(options))}")
        if db_text is not None:
            if not db_text.isdigit():
                raise ValueError("the Redis URL's database is not a number")
            address.db = int(db_text)
        return address

    def handshake(self) -> list[Command]:
        """The commands a new connection sends first: sign in, choose the database."""
        commands: list[Command] = []
        if self.password is not None:
            if self.username:
                commands.append(("AUTH", self.username, self.password))
            else:
                commands.append(("AUTH", self.password))
        if self.db:
            commands.append(("SELECT", self.db))
        return commands


def _ssl_context(options: dict[str, str]) -> ssl.SSLContext:
    """TLS as ``rediss://`` asks, by default verifying the server against the system's
    certificate authorities; the ``ssl_*`` options are taken out of ``options``."""
    import ssl

    try:
        context = ssl.create_default_context(cafile=options.pop("ssl_ca_certs", None))
    except OSError as error:
        raise ValueError(f"ssl_ca_certs cannot be read ({error.strerror})") from None
    reqs = options.pop("ssl_cert_reqs", "required").lower()
    check = options.pop("ssl_check_hostname", "true").lower()
    if reqs not in ("none", "optional", "required"):
        raise ValueError("ssl_cert_reqs is none, optional or required")
    if check not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError("ssl_check_hostname is true or false")
    if check in ("false", "0", "no") or reqs == "none":
        context.check_hostname = False
    context.verify_mode = {
        "none": ssl.CERT_NONE,
        "optional": ssl.CERT_OPTIONAL,
        "required": ssl.CERT_REQUIRED,
    }[reqs]
    return context


async def open_connection(
    address: Address, *, connect_timeout: float, reply_timeout: float
) -> _Connection:
    """A new connection to ``address``, signed in and on its database."""
    loop = asyncio.get_running_loop()
    connection = _Connection(address.where, reply_timeout)
    try:
        async with asyncio.timeout(connect_timeout):
            if address.path is not None:
                await loop.create_unix_connection(lambda: connection, address.path)
            else:
                await loop.create_connection(
                    lambda: connection,
                    address.host,
                    address.port,
                    ssl=address.ssl,
                    server_hostname=address.host if address.ssl is not None else None,
                )
    except TimeoutError:
        connection.close()
        raise RedisTimeout(
            f"could not connect to Redis at {address.where} in {connect_timeout:g}s"
        ) from None
    except OSError as error:
        connection.close()
        reason = error.strerror or type(error).__name__
        raise RedisUnavailable(f"could not connect to Redis at {address.where}: {reason}") from None
    handshake = address.handshake()
    if handshake:
        payload = b"".join(encode(command) for command in handshake)
        try:
            replies = await connection.send(payload, len(handshake), many=True)
        except BaseException:
            connection.close()
            raise
        for reply in replies:
            if isinstance(reply, RedisReplyError):
                connection.close()
                # Redis's own words (WRONGPASS, NOAUTH, a bad DB index) hold no password
                raise RedisUnavailable(f"Redis at {address.where} refused the connection: {reply}")
    return connection


# The client


class RedisClient:
    """Commands to one Redis on one connection, opened on first use and again after a
    failure (see the module's docstring for what fails how)."""

    def __init__(
        self,
        address: Address,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float | None = None,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self.connect_timeout = timeout if connect_timeout is None else connect_timeout
        self._connection: _Connection | None = None
        self._connecting: asyncio.Task[_Connection] | None = None

    @classmethod
    def from_url(
        cls, url: str, *, timeout: float = DEFAULT_TIMEOUT, connect_timeout: float | None = None
    ) -> RedisClient:
        return cls(Address.from_url(url), timeout=timeout, connect_timeout=connect_timeout)

    async def call(self, *command: Arg) -> Any:
        """The reply to one command; an error reply is raised."""
        reply = await self._send(encode(command), 1, many=False)
        if isinstance(reply, RedisReplyError):
            raise reply
        return reply

    async def pipeline(self, commands: Sequence[Command]) -> list[Any]:
        """The replies to ``commands``, sent in one write; not a transaction (each runs
        on its own). An error reply is returned in its place, not raised."""
        if not commands:
            return []
        payload = b"".join([encode(command) for command in commands])
        replies: list[Any] = await self._send(payload, len(commands), many=True)
        return replies

    async def transaction(self, commands: Sequence[Command]) -> list[Any]:
        """The replies to ``commands`` run as one ``MULTI``/``EXEC`` transaction; an error
        (a command Redis would not queue, which aborts it) is raised."""
        sent: list[Command] = [("MULTI",), *commands, ("EXEC",)]
        replies = await self._send(b"".join([encode(c) for c in sent]), len(sent), many=True)
        for reply in replies:
            if isinstance(reply, RedisReplyError):
                raise reply
        result = replies[-1]
        if not isinstance(result, list):
            raise RedisReplyError(f"the transaction was not run: {result!r}")
        for reply in result:
            if isinstance(reply, RedisReplyError):
                raise reply
        return result

    def script(self, source: str) -> Script:
        return Script(self, source)

    def pubsub(self) -> PubSub:
        return PubSub(self)

    async def aclose(self) -> None:
        """Close the connection; the client connects again if used after."""
        if self._connecting is not None:
            self._connecting.cancel()
            self._connecting = None
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _send(self, payload: bytes, replies: int, *, many: bool) -> Any:
        """Send once, and once more on a new connection after a connection error."""
        try:
            connection = self._connection
            if connection is None or connection.closed:
                connection = await self._connect()
            return await connection.send(payload, replies, many=many)
        except (RedisTimeout, ClientClosed):
            raise
        except RedisUnavailable:
            connection = await self._connect()
            return await connection.send(payload, replies, many=many)

    async def _connect(self) -> _Connection:
        """The open connection, or a new one (one at a time, however many callers ask)."""
        connection = self._connection
        if connection is not None and not connection.closed:
            return connection
        task = self._connecting
        if task is None:
            task = asyncio.get_running_loop().create_task(self.open_connection())
            task.add_done_callback(self._connected)
            self._connecting = task
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and current is not None and not current.cancelling():
                # the connect was called off by ``aclose``, not this caller
                where = self.address.where
                raise ClientClosed(f"the client for Redis at {where} was closed") from None
            raise

    def _connected(self, task: asyncio.Task[_Connection]) -> None:
        if self._connecting is task:
            self._connecting = None
        if not task.cancelled() and task.exception() is None:
            self._connection = task.result()

    async def open_connection(self) -> _Connection:
        """A new connection of its own (a subscription's)."""
        return await open_connection(
            self.address, connect_timeout=self.connect_timeout, reply_timeout=self.timeout
        )


class Script:
    """A Lua script run by its SHA1 (``EVALSHA``), sent whole (``EVAL``, which also
    loads it) when Redis does not have it."""

    __slots__ = ("client", "sha", "source")

    def __init__(self, client: RedisClient, source: str) -> None:
        self.client = client
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def evalsha(self, keys: Sequence[Arg], args: Sequence[Arg]) -> Command:
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

    def eval(self, keys: Sequence[Arg], args: Sequence[Arg]) -> Command:
        return ("EVAL", self.source, len(keys), *keys, *args)

    async def __call__(self, keys: Sequence[Arg], args: Sequence[Arg]) -> Any:
        try:
            return await self.client.call(*self.evalsha(keys, args))
        except NoScript:
            return await self.client.call(*self.eval(keys, args))


class PubSub:
    """A subscription, on a connection of its own. A lost connection is raised by
    ``get_message``; subscribe again on a new ``PubSub``."""

    def __init__(self, client: RedisClient) -> None:
        self._client = client
        self._connection: _Connection | None = None
        self._messages: deque[Any] = deque()
        self._arrived: asyncio.Event | None = None

    async def subscribe(self, *channels: str) -> None:
        connection = self._connection
        if connection is None:
            connection = self._connection = await self._client.open_connection()
        self._arrived = asyncio.Event()
        connection.push = self._push  # what comes after the confirmations, even at once
        reply = await connection.send(encode(("SUBSCRIBE", *channels)), len(channels), many=True)
        for confirmation in reply:
            if isinstance(confirmation, RedisReplyError):
                raise confirmation

    def _push(self, reply: Any) -> None:
        self._messages.append(reply)
        if self._arrived is not None:
            self._arrived.set()

    async def get_message(self, within: float) -> bytes | None:
        """The next message published on a subscribed channel, or None after
        ``within`` seconds without one."""
        if self._arrived is None:
            raise RedisError("get_message before subscribe")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            while self._messages:
                reply = self._messages.popleft()
                if isinstance(reply, RedisError):
                    self._messages.appendleft(reply)  # the connection stays failed
                    raise reply
                if isinstance(reply, list) and len(reply) == 3 and reply[0] == b"message":
                    data: bytes = reply[2]
                    return data
            self._arrived.clear()
            left = deadline - loop.time()
            if left <= 0:
                return None
            try:
                async with asyncio.timeout(left):
                    await self._arrived.wait()
            except TimeoutError:
                return None

    async def aclose(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
