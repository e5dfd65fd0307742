"""Log lines in text and JSON, with structured fields; a traceback stays under its line."""

from __future__ import annotations

import logging
import sys

import orjson

from parley.telemetry.logs import JsonFormatter, TextFormatter


def record(message: str, fields: dict[str, object] | None = None) -> logging.LogRecord:
    entry = logging.LogRecord("parley.upstream", logging.WARNING, __file__, 1, message, (), None)
    if fields is not None:
        entry.fields = fields
    return entry


FIELDS = {"channel": "local", "model": "chat large", "status": 502, "request_id": "req_1"}


def test_text_lines_carry_the_fields_as_key_value() -> None:
    line = TextFormatter().format(record("upstream call failed", FIELDS))
    assert line.endswith(
        'parley.upstream: upstream call failed channel=local model="chat large" '
        "status=502 request_id=req_1"
    )
    assert "WARNING" in line
    plain = TextFormatter().format(record("no fields"))
    assert plain.endswith("parley.upstream: no fields")


def test_json_lines_are_one_object_with_the_fields_on_top() -> None:
    line = JsonFormatter().format(record("upstream call failed", FIELDS))
    assert "\n" not in line
    entry = orjson.loads(line)
    assert entry["message"] == "upstream call failed"
    assert entry["level"] == "warning"
    assert entry["logger"] == "parley.upstream"
    assert entry["status"] == 502
    assert entry["model"] == "chat large"
    assert entry["time"].endswith("+00:00")


def test_an_exception_stays_inside_the_json_object() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failing = record("failed", {"request_id": "req_2"})
        failing.exc_info = sys.exc_info()
    entry = orjson.loads(JsonFormatter().format(failing))
    assert "ValueError: boom" in entry["exception"]
    text = TextFormatter().format(failing)
    assert text.splitlines()[0].endswith("failed request_id=req_2")
    assert "Traceback" in text


# No value forges a line


FORGERIES = ["\nFORGED", "\r\nFORGED", "\rFORGED", "\x1b[2K\rFORGED", "\u2028FORGED", "\x85FORGED"]


def starts_a_line(text: str) -> bool:
    """Whether ``FORGED`` begins a line, by any reading of line breaks."""
    return any(line.startswith(("FORGED", "\x1b")) for line in text.splitlines())


def test_a_control_character_in_a_message_or_field_is_escaped() -> None:
    for forged in FORGERIES:
        entry = logging.LogRecord(
            "parley.access", logging.INFO, __file__, 1, "%s %s %s", ("GET", forged, 404), None
        )
        entry.fields = {"path": forged, "model": f"chat{forged}", "plain": "x"}
        line = TextFormatter().format(entry)
        assert len(line.splitlines()) == 1, repr(line)
        assert not starts_a_line(line)
        assert line.isprintable(), repr(line)
    line = TextFormatter().format(
        logging.LogRecord("x", logging.INFO, __file__, 1, "a\nb\x1bc\u2028d\x7f", (), None)
    )
    assert line.endswith(r"x: a\nb\x1bc\u2028d\x7f")


def test_a_traceback_below_a_line_is_indented_and_escaped() -> None:
    try:
        raise ValueError("boom\nFORGED \x1b[31m")
    except ValueError:
        failing = record("failed on /x\nFORGED", {"request_id": "req_3"})
        failing.exc_info = sys.exc_info()
    text = TextFormatter().format(failing)
    head, *below = text.split("\n")
    assert head.endswith(r"failed on /x\nFORGED request_id=req_3")
    assert below and all(line.startswith("    ") for line in below)
    assert "Traceback" in below[0] and "\x1b" not in text
    entry = orjson.loads(JsonFormatter().format(failing))
    assert entry["message"] == "failed on /x\nFORGED"
