"""The reply parser on its own, fed bytes with no socket (sans-IO, as h11 is tested).

Every framing RFC 9112 gives a reply, what may surround one, and what a broken or hostile
upstream may send, each fed whole and split at every byte, so a rule never depends on how
the bytes happened to arrive. The socket's side (timers, flow control, the pool) is
tested against real servers in the other suites of this folder.
"""

from __future__ import annotations

import gzip

import pytest

from parley.http import BrokenReply, Disconnected, HeadLimits, HeadTooLarge
from parley.http.parsing import ReplyParser

OK_HEAD = b"HTTP/1.1 200 OK\r\n"


def splits(data: bytes) -> list[list[bytes]]:
    """``data`` whole, byte by byte, and cut in two at every offset."""
    return [[data], [data[i : i + 1] for i in range(len(data))]] + [
        [data[:i], data[i:]] for i in range(1, len(data))
    ]


def parse(pieces: list[bytes], *, bodiless: bool = False) -> tuple[ReplyParser, bytes, bool]:
    """Feed ``pieces`` in order; the parser, the body taken and whether every feed was
    accepted (``False``: the connection could carry nothing more)."""
    parser = ReplyParser()
    parser.begin(bodiless)
    body, accepted = [], True
    for piece in pieces:
        accepted = parser.feed(piece)
        body.append(parser.take())
        if not accepted:
            break
    return parser, b"".join(body), accepted


@pytest.mark.parametrize(
    ("reply", "body"),
    [
        (OK_HEAD + b"Content-Length: 5\r\n\r\nhello", b"hello"),
        (OK_HEAD + b"Content-Length: 0\r\n\r\n", b""),
        (OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", b"hello"),
        (
            OK_HEAD
            + b"Transfer-Encoding: CHUNKED\r\n\r\n3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n",
            b"abc0123456789",
        ),
        (
            OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: 1\r\n\r\n",
            b"ok",
        ),
    ],
)
def test_a_framed_body_is_whole_however_its_bytes_arrive(reply: bytes, body: bytes) -> None:
    for pieces in splits(reply):
        parser, taken, accepted = parse(pieces)
        assert accepted and parser.complete and parser.failure is None
        assert (parser.status, taken) == (200, body)
        assert parser.reusable, "a whole framed reply leaves the connection reusable"


def test_the_head_is_read_with_lower_case_names_and_trailers_are_not_headers() -> None:
    reply = (
        OK_HEAD
        + b"Content-Type: Text/Plain\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Late: 1\r\n\r\n"
    )
    parser, _, _ = parse([reply])
    assert parser.headers[b"content-type"] == b"Text/Plain"
    assert b"x-late" not in parser.headers


def test_the_head_is_known_before_the_body_arrives() -> None:
    parser = ReplyParser()
    parser.begin(False)
    assert parser.feed(OK_HEAD + b"Content-Length: 4\r\n\r\nab")
    assert parser.answered and not parser.complete
    assert parser.take() == b"ab"
    assert parser.feed(b"cd")
    assert parser.complete and parser.take() == b"cd" and parser.drained


def test_interim_replies_are_skipped_for_the_final_one() -> None:
    reply = (
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK_HEAD + b"Content-Length: 2\r\n\r\nok"
    )
    for pieces in splits(reply):
        parser, body, _ = parse(pieces)
        assert (parser.status, body, parser.complete) == (200, b"ok", True)
        assert b"link" not in parser.headers


def test_an_interim_reply_alone_is_not_an_answer() -> None:
    parser, _, _ = parse([b"HTTP/1.1 100 Continue\r\n\r\n"])
    assert not parser.answered and not parser.complete


def test_a_reply_to_head_has_no_body_whatever_its_length() -> None:
    parser, body, _ = parse([OK_HEAD + b"Content-Length: 99\r\n\r\n"], bodiless=True)
    assert parser.complete and body == b"" and parser.reusable


@pytest.mark.parametrize("status", [204, 304])
def test_204_and_304_have_no_body(status: int) -> None:
    parser, body, _ = parse([b"HTTP/1.1 %d Nothing\r\n\r\n" % status])
    assert (parser.status, parser.complete, body) == (status, True, b"")


def test_a_body_without_length_or_chunks_ends_with_the_input() -> None:
    parser, body, _ = parse([OK_HEAD + b"\r\nuntil the end"])
    assert not parser.complete
    parser.end_of_input(clean=True)
    assert parser.complete and body == b"until the end" and parser.failure is None
    assert not parser.reusable, "a body the close ended leaves nothing to reuse"


def test_a_body_without_length_ended_by_a_reset_is_disconnected() -> None:
    parser, _, _ = parse([OK_HEAD + b"\r\npart"])
    parser.end_of_input(clean=False)
    assert isinstance(parser.failure, Disconnected)


@pytest.mark.parametrize(
    "reply",
    [
        OK_HEAD + b"Content-Length: 10\r\n\r\ncut",
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel",
        OK_HEAD + b"Content-Length: 2\r\n",
    ],
)
def test_a_reply_cut_short_is_disconnected(reply: bytes) -> None:
    parser, _, accepted = parse([reply])
    assert accepted and not parser.complete
    parser.end_of_input(clean=True)
    assert isinstance(parser.failure, Disconnected)


def test_bytes_after_the_reply_close_the_connection_and_leave_the_reply_whole() -> None:
    reply = OK_HEAD + b"Content-Length: 2\r\n\r\nok"
    for extra in (OK_HEAD + b"Content-Length: 2\r\n\r\nno", b"junk"):
        parser, body, accepted = parse([reply + extra])
        assert not accepted, "nothing may follow the reply"
        assert (body, parser.complete, parser.failure) == (b"ok", True, None)
        later, _, accepted_later = parse([reply, extra])
        assert not accepted_later and later.complete and later.failure is None


def test_a_connection_close_reply_is_not_reusable() -> None:
    parser, _, _ = parse([OK_HEAD + b"Connection: close\r\nContent-Length: 2\r\n\r\nok"])
    assert parser.complete and not parser.reusable


def test_http_1_0_keep_alive_is_honoured() -> None:
    parser, _, _ = parse(
        [b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"]
    )
    assert parser.reusable


def test_a_request_not_sent_whole_forgoes_reuse() -> None:
    parser, _, _ = parse([OK_HEAD + b"Content-Length: 2\r\n\r\nok"])
    parser.forgo_reuse()
    assert not parser.reusable


@pytest.mark.parametrize(
    "reply",
    [
        b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
        OK_HEAD + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nok",
        OK_HEAD + b"Content-Length: x\r\n\r\n",
        OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
    ],
)
def test_a_reply_that_is_not_valid_http_is_broken(reply: bytes) -> None:
    parser, _, accepted = parse([reply])
    assert not accepted and isinstance(parser.failure, BrokenReply)
    assert not parser.reusable


def test_a_transfer_coding_other_than_chunked_is_broken() -> None:
    parser, _, _ = parse([OK_HEAD + b"Transfer-Encoding: gzip\r\n\r\n"])
    assert isinstance(parser.failure, BrokenReply)


def test_an_unknown_content_encoding_is_broken_and_gzip_gets_a_decoder() -> None:
    broken, _, _ = parse([OK_HEAD + b"Content-Encoding: zstd\r\nContent-Length: 0\r\n\r\n"])
    assert isinstance(broken.failure, BrokenReply)
    packed = gzip.compress(b"hello")
    reply = OK_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed)
    parser, body, _ = parse([reply + packed])
    assert parser.decoder is not None and parser.decoder.decode(body) == b"hello"


def test_the_keep_alive_timeout_hint_is_read() -> None:
    parser, _, _ = parse([OK_HEAD + b"Keep-Alive: timeout=5, max=100\r\nContent-Length: 0\r\n\r\n"])
    assert parser.keep_alive_hint == 5.0


LIMITS = HeadLimits(max_bytes=200, max_fields=5)


def bounded(pieces: list[bytes]) -> tuple[ReplyParser, bool]:
    parser = ReplyParser(LIMITS)
    accepted = True
    for piece in pieces:
        accepted = parser.feed(piece)
        if not accepted:
            break
    return parser, accepted


def test_a_head_of_too_many_fields_is_too_large() -> None:
    head = OK_HEAD + b"".join(b"X-%d: 1\r\n" % i for i in range(6)) + b"\r\n"
    parser, accepted = bounded([head])
    assert not accepted and isinstance(parser.failure, HeadTooLarge)


def test_a_header_line_that_never_ends_is_cut_at_the_bound() -> None:
    parser, accepted = bounded([OK_HEAD + b"X-Long: "] + [b"a" * 50] * 10)
    assert not accepted and isinstance(parser.failure, HeadTooLarge)


def test_chunk_framing_without_body_bytes_counts_against_the_bound() -> None:
    head = OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    parser, accepted = bounded([head] + [b"1;" + b"e" * 60] * 5)
    assert not accepted and isinstance(parser.failure, HeadTooLarge)


def test_a_body_longer_than_the_bound_is_not_a_head() -> None:
    body = b"b" * 1000
    parser, accepted = bounded([OK_HEAD + b"Content-Length: 1000\r\n\r\n", body[:500], body[500:]])
    assert accepted and parser.complete and parser.failure is None


def test_begin_starts_a_fresh_reply_and_forget_drops_the_last_head() -> None:
    parser, _, _ = parse([OK_HEAD + b"X-Marker: 1\r\nContent-Length: 2\r\n\r\nok"])
    parser.forget()
    assert parser.headers == {}
    parser.begin(False)
    assert parser.feed(b"HTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nx")
    assert (parser.status, parser.take(), parser.complete) == (404, b"x", True)


def test_replies_one_after_another_on_a_kept_alive_connection() -> None:
    """llhttp carries on from a whole kept-alive reply; each reply is read as its own,
    however the next one's bytes arrive."""
    first = OK_HEAD + b"Content-Length: 2\r\n\r\nok"
    second = OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n3\r\nyes\r\n0\r\n\r\n"
    for pieces in splits(second):
        parser, body, _ = parse([first])
        assert body == b"ok" and parser.reusable
        parser.begin(False)
        taken = []
        for piece in pieces:
            assert parser.feed(piece)
            taken.append(parser.take())
        assert (parser.status, b"".join(taken), parser.complete) == (200, b"yes", True)


def test_a_reply_after_the_reply_to_head_is_read_afresh() -> None:
    """llhttp would take the next reply's bytes for the body the ``HEAD`` reply's
    length announced: after a bodiless reply the parser starts again."""
    parser, _, _ = parse([OK_HEAD + b"Content-Length: 9\r\n\r\n"], bodiless=True)
    assert parser.complete and parser.reusable
    parser.begin(False)
    assert parser.feed(OK_HEAD + b"Content-Length: 2\r\n\r\nok")
    assert (parser.status, parser.take(), parser.complete) == (200, b"ok", True)
