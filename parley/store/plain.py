"""What the tables' module, the SQLite usage writer and the SQLite serving layer share,
without SQLAlchemy: the host's usage writer (``usage_host.py``) and a worker serving /v1
on a SQLite file (``sqlite_serving.py``) load none of SQLAlchemy.

It holds the SQLite connections' settings (``engine.py`` uses the same), the text form
``UtcDateTime`` gives a timestamp in SQLite (``schema.py``), reading a SQLite file's path
from the operator's URL, and the migration scripts' head revision read from their text.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote

ROLLUP_TOTALS = (
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "characters",
    "audio_ms",
    "cost_nanos",
    "cached_tokens",
    "cache_write_tokens",
)
"""The summed columns of ``usage_daily``, in ``DailyUsage`` order."""

MIGRATIONS = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 5000
SQLITE_PRAGMAS = (
    f"busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}",
    "synchronous = NORMAL",
    "foreign_keys = ON",
)
"""Set on every connection. WAL is set once, by ``upgrade_to_head``: it is kept in the file."""
SQLITE_CACHED_STATEMENTS = 0
"""``sqlite3``'s per-connection cache of prepared statements, off. The usage writer's
``INSERT … VALUES (…), (…) … RETURNING`` has one text per batch size, so the default cache
(128 per connection) fills with large statements that are never used again, native
memory that grows with every batch size seen and that ``tracemalloc`` cannot see. The
hot path never reads the database, so re-preparing costs nothing that matters."""


def as_utc(value: datetime) -> datetime:
    """The same instant as an aware UTC datetime (naive values are read as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def utc_text(value: datetime) -> str:
    """``value`` as ``UtcDateTime`` writes it in SQLite: UTC, no zone, microseconds
    (``YYYY-MM-DD HH:MM:SS.ffffff``, SQLAlchemy's SQLite ``DATETIME`` storage format). One
    fixed width, so the text sorts in time order and compares as SQLAlchemy's bound
    values do."""
    at = as_utc(value)
    return (
        f"{at.year:04d}-{at.month:02d}-{at.day:02d} "
        f"{at.hour:02d}:{at.minute:02d}:{at.second:02d}.{at.microsecond:06d}"
    )


def utc_from_text(text: str) -> datetime:
    """A timestamp ``UtcDateTime`` wrote in SQLite, read back as it reads it: an aware UTC
    datetime (SQLAlchemy parses the text with ``datetime.fromisoformat``)."""
    return as_utc(datetime.fromisoformat(text))


_URL = re.compile(
    r"^(?P<name>[\w+]+)://"
    r"(?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?"
    r"(?:(?:\[(?P<ipv6host>[^/?]+)\]|(?P<ipv4host>[^/:?]+))?(?::(?P<port>[^/?]*))?)?"
    r"(?:/(?P<database>[^?]*))?"
    r"(?:\?(?P<query>.*))?",
    re.X,
)
"""SQLAlchemy's own pattern for a database URL (``sqlalchemy.engine.url._parse_url``)."""


def sqlite_file(url: str) -> str | None:
    """The path of a SQLite file URL without options; None for anything else (memory,
    PostgreSQL, a URL with query options): a memory database or a URL with options keeps
    SQLAlchemy's usage writer and ``SqlStore``. Read as SQLAlchemy's ``make_url`` reads
    it (``tests/unit/test_sqlite_serving.py`` holds the two to the same answers)."""
    found = _URL.match(url)
    if found is None or found["name"].split("+")[0] != "sqlite":
        return None
    if found["query"] and parse_qsl(found["query"]):
        return None
    database = found["database"]
    if database is None or unquote(database) in ("", ":memory:"):
        return None
    return unquote(database)


def shown_sqlite_file(url: str) -> str | None:
    """A SQLite file URL as SQLAlchemy's ``URL.render_as_string`` shows it (it has no
    password to hide), for the command line to name the database without loading
    SQLAlchemy; None for any other URL, which SQLAlchemy renders."""
    found = _URL.match(url)
    if found is None or sqlite_file(url) is None or found["query"] is not None:
        return None
    if any(found[part] is not None for part in ("username", "ipv4host", "ipv6host", "port")):
        return None
    return f"{found['name']}:///{quote(unquote(found['database']), safe=' +/')}"


_REVISION_LINE = re.compile(r"^(down_revision|revision)\b[^=]*=\s*(None|['\"]([^'\"]+)['\"])", re.M)


def head_revision(versions: Path = MIGRATIONS / "versions") -> str | None:
    """The one head of the migration scripts, read from their text without Alembic;
    ``None`` when it is not a plain chain (a merge, a branch), so Alembic decides."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in versions.glob("*.py"):
        found = dict((m.group(1), m.group(3)) for m in _REVISION_LINE.finditer(script.read_text()))
        if "revision" not in found or found["revision"] is None:
            continue
        revisions.add(found["revision"])
        if found.get("down_revision"):
            parents.add(found["down_revision"])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None
