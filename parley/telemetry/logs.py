"""Log lines an operator (or a log shipper) can use: text or JSON, with structured fields.

A structured line is logged with its fields in ``extra={"fields": {...}}``. The text
format appends them as ``key=value`` (values quoted when they hold spaces); the JSON
format writes one object per line with ``time``, ``level``, ``logger``, ``message`` and
the fields as top-level keys. Fields are chosen by the caller, never the request's body
or headers, so no key or message content reaches a log.

No value can forge a line. In the text format every control character of a line's
message and fields (line breaks, other C0 and C1 controls, ``DEL``, the Unicode line and
paragraph separators, the ``ESC`` that starts a terminal's escape sequence) is written
as an escape (``\\n``, ``\\x1b``, ``\\u2028``), whatever the message's arguments (a
path, a header, a model name) hold, and the lines of a traceback below a line are
indented, so every line that starts in the first column begins a record. The JSON
format escapes them as JSON does, and a record is one line.
"""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

LogFormat = Literal["text", "json"]
FIELDS = "fields"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET_LOGGERS = ("alembic",)
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""What no text log line holds as it is: C0 and C1 controls, DEL, the line separators."""
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
TRACEBACK_INDENT = "    "


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    found = getattr(record, FIELDS, None)
    return found if isinstance(found, dict) else {}


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value key="two words"``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        head = escaped(self.formatMessage(record))
        extra = fields_of(record)
        if extra:
            pairs = " ".join(f"{key}={_text_value(value)}" for key, value in extra.items())
            head = f"{head} {pairs}"
        below = self._below(record)
        if not below:
            return head
        lines = (TRACEBACK_INDENT + escaped(line) for line in below.splitlines())
        return "\n".join((head, *lines))

    def _below(self, record: logging.LogRecord) -> str:
        """The traceback and stack written under the line, as ``Formatter.format``
        writes them."""
        parts: list[str] = []
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            parts.append(record.exc_text)
        if record.stack_info:
            parts.append(self.formatStack(record.stack_info))
        return "\n".join(parts)


def escaped(text: str) -> str:
    """``text`` with every control character written as an escape: one line."""
    if text.isprintable():
        return text
    return _CONTROLS.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    character = match.group()
    named = _NAMED_ESCAPES.get(character)
    if named is not None:
        return named
    code = ord(character)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _text_value(value: Any) -> str:
    text = "-" if value is None else str(value)
    if not text or any(mark in text for mark in ' ="') or not text.isprintable():
        return escaped(orjson.dumps(text).decode())
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in fields_of(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(log_format: LogFormat = "text", level: int = logging.INFO) -> None:
    """Log to stderr in ``log_format``; replaces handlers set before (a worker reconfigures)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
