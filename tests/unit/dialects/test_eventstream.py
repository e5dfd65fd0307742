"""AWS event-stream framing and the ConverseStream reader, sans-IO: fed bytes split at
every boundary and one byte at a time, with checksum failures and exception frames.
The frames are written by the Bedrock fake's own encoder (``tests/upstreams/bedrock.py``)."""

from __future__ import annotations

import struct
import zlib

import pytest

from parley.dialects.bedrock_converse import JSON_TOOL
from parley.dialects.converse_to_chat import ConverseToChat
from parley.dialects.eventstream import EventStreamDecoder, Frame
from tests.upstreams.bedrock import event_frame, exception_frame, frame

LIMIT = 1 << 20


def typed_frame() -> bytes:
    """A frame with one header of every value type, built by hand from the reference."""
    headers = b"".join(
        (
            b"\x04true\x00",
            b"\x05false\x01",
            b"\x04byte\x02" + struct.pack(">b", -3),
            b"\x05short\x03" + struct.pack(">h", 300),
            b"\x03int\x04" + struct.pack(">i", -70000),
            b"\x04long\x05" + struct.pack(">q", 1 << 40),
            b"\x05bytes\x06" + struct.pack(">H", 3) + b"\x00\x01\x02",
            b"\x06string\x07" + struct.pack(">H", 5) + b"h\xc3\xa9llo"[:5],
            b"\x04time\x08" + struct.pack(">q", 1_700_000_000_000),
            b"\x04uuid\x09" + bytes(range(16)),
        )
    )
    payload = b'{"x":1}'
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return head + struct.pack(">I", zlib.crc32(head))


def test_every_header_type_is_read() -> None:
    (found,) = EventStreamDecoder(LIMIT).feed(typed_frame())
    assert found.payload == b'{"x":1}'
    assert found.headers == {
        "true": True, "false": False, "byte": -3, "short": 300, "int": -70000,
        "long": 1 << 40, "bytes": b"\x00\x01\x02", "string": "héll",
        "time": 1_700_000_000_000, "uuid": bytes(range(16)),
    }  # fmt: skip


def stream() -> bytes:
    return b"".join(
        (
            event_frame("messageStart", {"role": "assistant"}),
            event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "hi"}}),
            event_frame("contentBlockStop", {"contentBlockIndex": 0}),
            event_frame("messageStop", {"stopReason": "end_turn"}),
            event_frame("metadata", {"usage": {"inputTokens": 3, "outputTokens": 1}}),
        )
    )


def decoded(pieces: list[bytes]) -> list[Frame]:
    decoder = EventStreamDecoder(LIMIT)
    frames = [found for piece in pieces for found in decoder.feed(piece)]
    assert decoder.error is None and decoder.pending == 0
    return frames


def test_frames_split_at_every_boundary_decode_alike() -> None:
    data = stream()
    whole = decoded([data])
    assert [f.header(":event-type") for f in whole] == [
        "messageStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata",
    ]  # fmt: skip
    for cut in range(len(data) + 1):
        assert decoded([data[:cut], data[cut:]]) == whole
    assert decoded([data[i : i + 1] for i in range(len(data))]) == whole


@pytest.mark.parametrize("where", ["prelude", "message", "lengths"])
def test_a_broken_frame_stops_the_decoder(where: str) -> None:
    good = event_frame("messageStart", {"role": "assistant"})
    bad = bytearray(event_frame("contentBlockDelta", {"delta": {"text": "x"}}))
    if where == "prelude":
        bad[9] ^= 0xFF
    elif where == "message":
        bad[-1] ^= 0xFF
    else:  # a headers length past the total, with a prelude CRC that matches it
        bad[4:8] = struct.pack(">I", 4096)
        bad[8:12] = struct.pack(">I", zlib.crc32(bytes(bad[:8])))
    decoder = EventStreamDecoder(LIMIT)
    found = decoder.feed(good + bytes(bad) + good)
    assert [f.header(":event-type") for f in found] == ["messageStart"]
    assert decoder.error is not None and not decoder.too_large
    assert decoder.feed(good) == []


def test_a_frame_past_the_bound_is_refused_from_its_prelude() -> None:
    big = event_frame("contentBlockDelta", {"delta": {"text": "x" * 500}})
    decoder = EventStreamDecoder(100)
    assert decoder.feed(big[:12]) == []
    assert decoder.too_large and decoder.error is not None


def chunks_of(translator: ConverseToChat, pieces: list[bytes]) -> list[dict[str, object]]:
    return [chunk for piece in pieces for chunk in translator.feed(piece)]


def converse_stream() -> bytes:
    use = {"toolUseId": "t1", "name": "lookup"}
    return b"".join(
        (
            event_frame("messageStart", {"role": "assistant"}),
            event_frame("contentBlockDelta",
                        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hm"}}}),
            event_frame("contentBlockDelta", {"contentBlockIndex": 0,
                        "delta": {"reasoningContent": {"signature": "sig"}}}),
            event_frame("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": "Hi"}}),
            event_frame("contentBlockStart", {"contentBlockIndex": 2, "start": {"toolUse": use}}),
            event_frame("contentBlockDelta",
                        {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"q":'}}}),
            event_frame("contentBlockDelta",
                        {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '"x"}'}}}),
            event_frame("messageStop", {"stopReason": "tool_use"}),
            event_frame("metadata", {"usage": {"inputTokens": 5, "outputTokens": 7,
                        "cacheReadInputTokens": 10, "cacheWriteInputTokens": 2}}),
        )
    )  # fmt: skip


def test_converse_events_become_chat_chunks_in_any_split() -> None:
    data = converse_stream()
    expected = chunks_of(ConverseToChat(LIMIT, "m", created=1), [data])
    deltas = [c["choices"][0]["delta"] for c in expected[:-2]]  # type: ignore[index]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {"reasoning_content": "hm"},
        {"thinking_blocks": [{"type": "thinking", "thinking": "", "signature": "sig"}]},
        {"content": "Hi"},
        {"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                         "function": {"name": "lookup", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"q":'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"x"}'}}]},
    ]  # fmt: skip
    assert expected[-2]["choices"][0]["finish_reason"] == "tool_calls"  # type: ignore[index]
    assert expected[-1]["choices"] == []
    assert expected[-1]["usage"] == {
        "prompt_tokens": 17, "completion_tokens": 7, "total_tokens": 24,
        "prompt_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 2},
    }  # fmt: skip
    for cut in range(len(data) + 1):
        translator = ConverseToChat(LIMIT, "m", created=1)
        assert chunks_of(translator, [data[:cut], data[cut:]]) == expected
        assert translator.done and translator.failure is None
        usage = translator.delivered()
        assert usage is not None and (usage.cached_tokens, usage.cache_write_tokens) == (10, 2)
    one_by_one = ConverseToChat(LIMIT, "m", created=1)
    assert chunks_of(one_by_one, [data[i : i + 1] for i in range(len(data))]) == expected


def test_the_forced_json_tools_input_is_content_in_any_split() -> None:
    use = {"toolUseId": "t1", "name": JSON_TOOL}
    data = b"".join(
        (
            event_frame("messageStart", {"role": "assistant"}),
            event_frame("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": use}}),
            event_frame("contentBlockDelta",
                        {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"city":'}}}),
            event_frame("contentBlockDelta",
                        {"contentBlockIndex": 0, "delta": {"toolUse": {"input": ' "Oslo"}'}}}),
            event_frame("contentBlockStop", {"contentBlockIndex": 0}),
            event_frame("messageStop", {"stopReason": "tool_use"}),
            event_frame("metadata", {"usage": {"inputTokens": 5, "outputTokens": 7}}),
        )
    )  # fmt: skip
    expected = chunks_of(ConverseToChat(LIMIT, "m", created=1, json_output=True), [data])
    deltas = [c["choices"][0]["delta"] for c in expected[:-2]]  # type: ignore[index]
    assert deltas == [
        {"role": "assistant", "content": ""},
        {"content": '{"city":'},
        {"content": ' "Oslo"}'},
    ]
    assert expected[-2]["choices"][0]["finish_reason"] == "stop"  # type: ignore[index]
    for cut in range(len(data) + 1):
        translator = ConverseToChat(LIMIT, "m", created=1, json_output=True)
        assert chunks_of(translator, [data[:cut], data[cut:]]) == expected
    # Without json_output (the call did not force it) the same tool is an ordinary call.
    plain = chunks_of(ConverseToChat(LIMIT, "m", created=1), [data])
    assert plain[-2]["choices"][0]["finish_reason"] == "tool_calls"  # type: ignore[index]


def test_an_exception_frame_is_the_streams_failure_after_what_came_before() -> None:
    data = event_frame("messageStart", {"role": "assistant"}) + exception_frame(
        "throttlingException", "Too many requests"
    )
    for cut in range(len(data) + 1):
        translator = ConverseToChat(LIMIT, "m")
        out = chunks_of(translator, [data[:cut], data[cut:]])
        assert len(out) == 1
        assert translator.failure is not None
        assert translator.failure.payload == {
            "type": "throttlingException", "message": "Too many requests"
        }  # fmt: skip
        assert translator.feed(event_frame("metadata", {})) == []


def test_an_error_frame_and_a_bad_checksum_are_failures() -> None:
    error = frame({":message-type": "error", ":error-code": "InternalFailure",
                   ":error-message": "boom"}, b"")  # fmt: skip
    translator = ConverseToChat(LIMIT, "m")
    assert translator.feed(error) == []
    assert translator.failure is not None
    assert translator.failure.payload == {"type": "InternalFailure", "message": "boom"}
    broken = bytearray(event_frame("messageStart", {"role": "assistant"}))
    broken[-2] ^= 1
    translator = ConverseToChat(LIMIT, "m")
    assert translator.feed(bytes(broken)) == []
    assert translator.failure is not None and translator.failure.malformed
    small = ConverseToChat(16, "m")
    small.feed(event_frame("messageStart", {"role": "assistant"}))
    assert small.failure is not None and small.failure.too_large
