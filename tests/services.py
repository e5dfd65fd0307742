"""Where the suite finds PostgreSQL and Redis, and how to point it elsewhere.

The scale-out tests use a real PostgreSQL database and a real Redis database. By
default they are the ones a developer's machine (and CI) runs locally; two environment
variables move them:

- ``PARLEY_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``):
  a database the suite may create schemas and databases from. Tests work in schemas and
  databases of their own, named ``parley_test_…``, and drop them when they end.
- ``PARLEY_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``): a Redis database the
  suite writes keys to, each test under a random prefix of its own.

Without them reachable the tests that need them skip, saying which address they tried
(``PARLEY_REQUIRE_SERVICES=1``, as ``.ci/run`` sets, turns such a skip into a failure).
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

from sqlalchemy import make_url

POSTGRES_URL = os.environ.get(
    "PARLEY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("PARLEY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

_postgres = make_url(POSTGRES_URL)
POSTGRES_HOST = _postgres.host or "127.0.0.1"
POSTGRES_PORT = _postgres.port or 5432


def postgres_database(name: str) -> str:
    """The URL of the database ``name`` on the suite's PostgreSQL server."""
    return _postgres.set(database=name).render_as_string(hide_password=False)


def postgres_through(url: str, host: str, port: int) -> str:
    """``url`` reaching its server at ``host:port`` instead (a test's proxy)."""
    return make_url(url).set(host=host, port=port).render_as_string(hide_password=False)


def redis_address() -> tuple[str, int]:
    url = urlsplit(REDIS_URL)
    return url.hostname or "127.0.0.1", url.port or 6379


def redis_unreachable() -> str | None:
    """Why the suite's Redis cannot be reached, or None when it can."""
    try:
        socket.create_connection(redis_address(), timeout=1).close()
    except OSError as error:
        return f"no Redis at {REDIS_URL} ({error})"
    return None
