"""The Server-Sent Events parser and encoder."""

from __future__ import annotations

import pytest

from parley.sse import EventTooLarge, SseEvent, SseParser, encode_event

STREAM = (
    b": keep-alive comment\n"
    b'data: {"text": "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"}\n'
    b"\n"
    b"event: update\r\n"
    b"id: 7\r\n"
    b"data: first line\r\n"
    b"data: second line\r\n"
    b"\r\n"
    b"retry: 3000\r"
    b"data:no space\r"
    b"\r"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SseEvent('{"text": "héllo € 😀"}'),
    SseEvent("first line\nsecond line", "update", "7"),
    SseEvent("no space", None, "7"),
    SseEvent("[DONE]", None, "7"),
]


def parse(*chunks: bytes) -> list[SseEvent]:
    parser = SseParser()
    return [event for chunk in chunks for event in parser.feed(chunk)]


def test_whole_stream_at_once() -> None:
    assert parse(STREAM) == EXPECTED


@pytest.mark.parametrize("offset", range(len(STREAM) + 1))
def test_split_at_any_offset_gives_the_same_events(offset: int) -> None:
    assert parse(STREAM[:offset], STREAM[offset:]) == EXPECTED


def test_one_byte_at_a_time_gives_the_same_events() -> None:
    assert parse(*(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


def test_split_inside_a_multibyte_character() -> None:
    payload = "data: 日本語 😀\n\n".encode()
    for offset in range(len(payload) + 1):
        assert parse(payload[:offset], payload[offset:]) == [SseEvent("日本語 😀")]


def test_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    assert parse(b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n") == [SseEvent("a\nb")]


def test_lone_cr_line_endings() -> None:
    assert parse(b"data: a\rdata: b\r\r") == [SseEvent("a\nb")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert parse(b"data: one\ndata: two\ndata: three\n\n") == [SseEvent("one\ntwo\nthree")]


def test_comments_are_ignored_and_dispatch_nothing() -> None:
    assert parse(b": ping\n\n:\n\ndata: x\n: inside\n\n") == [SseEvent("x")]


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert parse(b"\n\n\nevent: lonely\n\ndata: x\n\n") == [SseEvent("x")]


def test_event_name_applies_to_its_event_only() -> None:
    assert parse(b"event: error\ndata: a\n\ndata: b\n\n") == [SseEvent("a", "error"), SseEvent("b")]


def test_empty_data_field_dispatches_an_empty_event() -> None:
    assert parse(b"data:\n\ndata\n\n") == [SseEvent(""), SseEvent("")]


def test_only_one_space_after_the_colon_is_stripped() -> None:
    assert parse(b"data:  two spaces\n\n") == [SseEvent(" two spaces")]


def test_unknown_fields_are_ignored() -> None:
    assert parse(b"foo: bar\ndata: x\nbaz\n\n") == [SseEvent("x")]


def test_retry_is_kept_when_numeric() -> None:
    parser = SseParser()
    parser.feed(b"retry: 1500\n\nretry: soon\n\n")
    assert parser.retry == 1500


def test_id_persists_and_ignores_values_with_nul() -> None:
    events = parse(b"id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n")
    assert [event.id for event in events] == ["1", "1"]


def test_an_unfinished_event_is_not_dispatched() -> None:
    assert parse(b"data: complete\n\ndata: cut short\n") == [SseEvent("complete")]


def test_a_leading_byte_order_mark_is_skipped() -> None:
    assert parse(b"\xef\xbb\xbfdata: x\n\n") == [SseEvent("x")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert parse(b"data: \xff\n\n") == [SseEvent("\ufffd")]


# The fast path (whole one-line ``data:`` events) must agree with the full parser.

ENGINE_LIKE = [
    b'data: {"a": 1}\n\ndata: {"b": "data: inside a value"}\n\n',
    b"data: one\n\n\ndata: two\n\n",  # an extra blank line
    b"data: x\ndata: y\n\ndata: z\n\n",  # two-line data
    b"data: x\n\n: comment\n\ndata: z\n\n",
    b"data: x\n\nid: 9\ndata: z\n\n",
    b"data: x\r\n\n",  # a CRLF line end, then an LF one
    b"data: a\r\rdata: [DONE]\n\n",  # lone CRs end a line and an event too
    b"data: a\rdata: b\n\n",  # one event of two lines, the first ended by a CR
    b"data:  two spaces\n\ndata:\n\n",
]


@pytest.mark.parametrize("chunk", ENGINE_LIKE)
def test_the_fast_paths_data_is_the_full_parsers(chunk: bytes) -> None:
    fast = SseParser().whole_data(chunk)
    if fast is not None:
        assert fast == [event.data.encode() for event in slow_parse(chunk)]


ONE_EVENT = [b"data: x\n\n", b'data: {"a": "data: b"}\n\n', b"data: \n\n", b"data: data: x\n\n"]


@pytest.mark.parametrize("chunk", ONE_EVENT)
def test_a_read_of_one_whole_event_takes_the_fast_path(chunk: bytes) -> None:
    assert SseParser().whole_data(chunk) == [e.data.encode() for e in slow_parse(chunk)]


@pytest.mark.parametrize(
    "chunk", [b"data: x\n", b"data: x\n\n\n", b"data:x\n\n", b"data: a\rb\n\n", b"\n\n"]
)
def test_a_read_of_one_line_that_is_not_a_whole_event_goes_the_slow_way(chunk: bytes) -> None:
    assert SseParser().whole_data(chunk) is None


def slow_parse(*chunks: bytes) -> list[SseEvent]:
    """The full parser only: every chunk fed one byte at a time."""
    return parse(*(chunk[i : i + 1] for chunk in chunks for i in range(len(chunk))))


@pytest.mark.parametrize("chunk", ENGINE_LIKE)
def test_whole_events_in_one_chunk_parse_as_byte_by_byte(chunk: bytes) -> None:
    assert parse(b"data: first\n\n", chunk) == slow_parse(b"data: first\n\n", chunk)


def test_an_event_name_from_an_earlier_chunk_is_kept() -> None:
    assert parse(b"event: error\n", b"data: x\n\n") == [SseEvent("x", "error")]


def test_an_id_from_an_earlier_event_is_carried() -> None:
    assert parse(b"id: 4\ndata: a\n\n", b"data: b\n\ndata: c\n\n") == [
        SseEvent("a", None, "4"),
        SseEvent("b", None, "4"),
        SseEvent("c", None, "4"),
    ]


def test_a_chunk_after_a_partial_line_completes_it() -> None:
    assert parse(b"data: ab", b"data: c\n\ndata: d\n\n") == [
        SseEvent("abdata: c"),
        SseEvent("d"),
    ]


def test_encode_event() -> None:
    assert encode_event(b'{"a": 1}') == b'data: {"a": 1}\n\n'
    assert encode_event(b"x", event="error") == b"event: error\ndata: x\n\n"


@pytest.mark.parametrize("data", [b"one\ntwo", b"one\r\ntwo\rthree", b"trailing\n", b""])
def test_encoded_events_parse_back(data: bytes) -> None:
    normalised = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").decode()
    assert parse(encode_event(data, event="e")) == [SseEvent(normalised, "e")]


# Bounds on one event


def test_a_line_without_end_stops_at_the_bound_however_it_arrives() -> None:
    parser = SseParser(max_event_bytes=1000)
    assert parser.feed(b"data: " + b"x" * 500) == []
    assert parser.feed(b"x" * 494) == []  # 1,000 bytes pending: at the bound, not past it
    with pytest.raises(EventTooLarge) as caught:
        parser.feed(b"x")
    assert caught.value.events == []


def test_an_event_of_many_data_lines_is_bounded_as_a_whole() -> None:
    parser = SseParser(max_event_bytes=100)
    with pytest.raises(EventTooLarge):
        for _ in range(20):
            parser.feed(b"data: 0123456789\n")


def test_events_completed_before_the_oversized_one_are_handed_over() -> None:
    parser = SseParser(max_event_bytes=100)
    with pytest.raises(EventTooLarge) as caught:
        parser.feed(b"data: one\n\ndata: two\n\ndata: " + b"y" * 200)
    assert [event.data for event in caught.value.events] == ["one", "two"]


def test_many_small_events_in_a_chunk_larger_than_the_bound_pass() -> None:
    chunk = b"".join(b'data: {"n": %d}\n\n' % n for n in range(100))
    events = SseParser(max_event_bytes=64).feed(chunk)
    assert [event.data for event in events] == [f'{{"n": {n}}}' for n in range(100)]


def test_an_event_at_the_bound_passes_and_the_count_starts_again_after_it() -> None:
    parser = SseParser(max_event_bytes=106)
    line = b"data: " + b"z" * 100
    for _ in range(3):
        (event,) = parser.feed(line[:50]) + parser.feed(line[50:] + b"\n") + parser.feed(b"\n")
        assert event.data == "z" * 100
