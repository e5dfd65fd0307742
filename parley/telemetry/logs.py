"""Log lines an operator (or a log shipper) can use: text or JSON, with structured fields.

A structured line is logged with its fields in ``extra={"fields": {...}}``. The text
format appends them as ``key=value`` (values quoted when they hold spaces); the JSON
format writes one object per line with ``time``, ``level``, ``logger``, ``message`` and
the fields as top-level keys. Fields are chosen by the caller, never the request's body
or headers, so no key or message content reaches a log.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

LogFormat = Literal["text", "json"]
FIELDS = "fields"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET_LOGGERS = ("alembic",)


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    found = getattr(record, FIELDS, None)
    return found if isinstance(found, dict) else {}


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value key="two words"``."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = fields_of(record)
        if not extra:
            return line
        pairs = " ".join(f"{key}={_text_value(value)}" for key, value in extra.items())
        head, newline, rest = line.partition("\n")  # a traceback stays below the line
        return f"{head} {pairs}{newline}{rest}"


def _text_value(value: Any) -> str:
    text = "-" if value is None else str(value)
    if not text or any(mark in text for mark in ' ="\n'):
        return orjson.dumps(text).decode()
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
