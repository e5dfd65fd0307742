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
