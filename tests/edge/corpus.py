"""Malformed HTTP, as raw bytes, and a raw-socket client that reads what comes back.

Each case is built around a key (``build(key)``) so a test can check that the key never
comes back in a reply or reaches a log. The cases are the ones aiohttp's parser refuses
(oversized or too many headers, control bytes, bad framing, bad paths, other protocols)
plus bodies that break while a handler reads them.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import Callable
from dataclasses import dataclass

READ_SECONDS = 10.0
CHAT = b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"


def auth(key: str) -> bytes:
    return b"Authorization: Bearer " + key.encode() + b"\r\n"


def _json_head(key: str, extra: bytes = b"") -> bytes:
    return CHAT + auth(key) + b"Content-Type: application/json\r\n" + extra


def _deep(levels: int) -> bytes:
    """A chat body whose ``meta`` field makes it ``levels`` deep (written by hand: orjson
    cannot serialize more than 254 levels, which is the bug this case pins)."""
    field = b"[" * (levels - 1) + b'"x"' + b"]" * (levels - 1)
    return (
        b'{"model":"chat-large","messages":[{"role":"user","content":"hi"}],"meta":' + field + b"}"
    )


def _chunked_then_broken(key: str) -> list[bytes]:
    head = _json_head(key, b"Transfer-Encoding: chunked\r\n\r\n")
    return [head + b'5\r\n{"mod\r\n', b"zz\r\nbroken\r\n0\r\n\r\n"]


CASES: dict[str, Callable[[str], list[bytes]]] = {
    "control byte in Authorization": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "
        + k.encode()
        + b"\x01\r\n\r\n"
    ],
    "NUL in Authorization": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "
        + k.encode()
        + b"\x00\r\n\r\n"
    ],
    "DEL in Authorization": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "
        + k.encode()
        + b"\x7f\r\n\r\n"
    ],
    "bare CR in Authorization": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "
        + k.encode()
        + b"\rX: 1\r\n\r\n"
    ],
    "Authorization over 8190 bytes": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "
        + k.encode()
        + b"a" * 9000
        + b"\r\n\r\n"
    ],
    "another header over 8190 bytes": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n"
        + auth(k)
        + b"X-Pad: "
        + b"p" * 9000
        + b"\r\n\r\n"
    ],
    "header name over 8190 bytes": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n" + auth(k) + b"X" * 9000 + b": v\r\n\r\n"
    ],
    "200 headers": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\n"
        + auth(k)
        + b"".join(b"X-H%d: v\r\n" % i for i in range(200))
        + b"\r\n"
    ],
    "LF line endings": lambda k: [
        b"GET /v1/models HTTP/1.1\nHost: gw\nAuthorization: Bearer " + k.encode() + b"\n\n"
    ],
    "space in a header name": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nBad Name: " + k.encode() + b"\r\n\r\n"
    ],
    "obsolete line folding": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer\r\n "
        + k.encode()
        + b"\r\n\r\n"
    ],
    "Content-Length with Transfer-Encoding": lambda k: [
        _json_head(k, b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    ],
    "Content-Length not a number": lambda k: [_json_head(k, b"Content-Length: ten\r\n\r\n")],
    "negative Content-Length": lambda k: [_json_head(k, b"Content-Length: -1\r\n\r\n")],
    "two Content-Lengths": lambda k: [
        _json_head(k, b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nab")
    ],
    "huge Content-Length": lambda k: [
        _json_head(k, b"Content-Length: 99999999999999999999999\r\n\r\n")
    ],
    "unknown Transfer-Encoding": lambda k: [_json_head(k, b"Transfer-Encoding: gzip\r\n\r\n")],
    "bad chunk size": lambda k: [_json_head(k, b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")],
    "bad chunk mid-body": _chunked_then_broken,
    "gzip body that is not gzip": lambda k: [
        _json_head(k, b"Content-Encoding: gzip\r\nContent-Length: 8\r\n\r\nnotgzip!")
    ],
    "gzip body that is not JSON": lambda k: [
        _json_head(
            k,
            b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
            % len(gzip.compress(b"\xff\xfe")),
        )
        + gzip.compress(b"\xff\xfe")
    ],
    "JSON nested 300 deep": lambda k: [
        _json_head(k, b"Content-Length: %d\r\n\r\n" % len(_deep(300))) + _deep(300)
    ],
    "non-UTF-8 bytes in the path": lambda k: [
        b"GET /v1/\xff\xfe HTTP/1.1\r\nHost: gw\r\n" + auth(k) + b"\r\n"
    ],
    "percent-encoded non-UTF-8 path": lambda k: [
        b"GET /v1/models/%ff%fe HTTP/1.1\r\nHost: gw\r\n" + auth(k) + b"\r\n"
    ],
    "percent-encoded NUL in the path": lambda k: [
        b"GET /v1/models/a%00b HTTP/1.1\r\nHost: gw\r\n" + auth(k) + b"\r\n"
    ],
    "non-UTF-8 query": lambda k: [
        b"GET /v1/dashboard/billing/usage?start_date=%ff%fe HTTP/1.1\r\nHost: gw\r\n"
        + auth(k)
        + b"\r\n"
    ],
    "request line over 8190 bytes": lambda k: [
        b"GET /v1/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: gw\r\n" + auth(k) + b"\r\n"
    ],
    "bad method": lambda k: [b"G@T /v1/models HTTP/1.1\r\nHost: gw\r\n" + auth(k) + b"\r\n"],
    "HTTP/3.7": lambda k: [b"GET /v1/models HTTP/3.7\r\nHost: gw\r\n" + auth(k) + b"\r\n"],
    "HTTP/1.1 without Host": lambda k: [b"GET /v1/models HTTP/1.1\r\n" + auth(k) + b"\r\n"],
    "HTTP/2 preface": lambda k: [b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"],
    "TLS ClientHello": lambda k: [
        bytes.fromhex("16030100a5010000a10303") + bytes(32) + b"\x00\x00\x02\x13\x01"
    ],
    "binary garbage": lambda k: [bytes(range(256))],
    "absolute URL that does not parse": lambda k: [
        b"GET http://[::1 HTTP/1.1\r\nHost: gw\r\n" + auth(k) + b"\r\n"
    ],
    "CONNECT": lambda k: [b"CONNECT gw:443 HTTP/1.1\r\nHost: gw:443\r\n" + auth(k) + b"\r\n"],
    "websocket upgrade": lambda k: [
        b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + auth(k)
        + b"\r\n"
    ],
}


@dataclass(frozen=True)
class RawReply:
    """What came back: the status (``None`` if the connection closed with no reply)."""

    status: int | None
    headers: dict[str, str]
    body: bytes
    raw: bytes


async def exchange(port: int, pieces: list[bytes]) -> RawReply:
    """Send ``pieces`` (a pause between them); read one whole reply, or until the close."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for index, piece in enumerate(pieces):
            if index:
                await asyncio.sleep(0.05)
            writer.write(piece)
            try:
                await writer.drain()
            except ConnectionError:
                break
        raw = await _read_reply(reader)
    finally:
        writer.close()
    return parse_reply(raw)


async def _read_reply(reader: asyncio.StreamReader) -> bytes:
    received = b""
    try:
        async with asyncio.timeout(READ_SECONDS):
            while not _whole(received) and (chunk := await reader.read(65536)):
                received += chunk
    except ConnectionError:
        pass
    return received


def _whole(raw: bytes) -> bool:
    head, found, rest = raw.partition(b"\r\n\r\n")
    if not found:
        return False
    lowered = head.lower()
    if b"content-length:" in lowered:
        length = int(lowered.split(b"content-length:")[1].split(b"\r\n")[0])
        return len(rest) >= length
    return rest.endswith(b"0\r\n\r\n")


def parse_reply(raw: bytes) -> RawReply:
    """The first reply in ``raw`` (a ``Content-Length`` or chunked body)."""
    if not raw:
        return RawReply(None, {}, b"", raw)
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        return RawReply(status, headers, rest[: int(headers["content-length"])], raw)
    return RawReply(status, headers, _unchunk(rest), raw)


def _unchunk(data: bytes) -> bytes:
    body = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        body, data = body + data[:size], data[size + 2 :]
    return body
