"""A query the database refuses is Parley's fault, not the database being away.

The database here is up; a table is missing, as after a migration that did not run. What
reads it (billing usage, the admin API, the dashboard) answers 500 with the envelope of
any internal error, not 503 "database unavailable" with a retry hint that would never
help, and the log has one line with the driver's reason: no statement, no parameters,
no traceback. Calls with a known key go on: the hot path never reads the database.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from parley.errors import INTERNAL_ERROR_MESSAGE
from tests.api.admin_client import ADMIN, admin_gateway, browser_session, chat_status, login
from tests.api.harness import StartGateway, call

INTERNAL = {
    "error": {
        "message": INTERNAL_ERROR_MESSAGE,
        "type": "server_error",
        "param": None,
        "code": None,
    }
}


def rename_table(database: Path, table: str) -> None:
    conn = sqlite3.connect(database)
    try:
        conn.execute(f"ALTER TABLE {table} RENAME TO {table}_elsewhere")
        conn.commit()
    finally:
        conn.close()


def fault_lines(caplog: pytest.LogCaptureFixture, path: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if path in r.getMessage() and r.levelno >= logging.ERROR]


async def test_a_missing_table_is_a_500_logged_in_one_line_not_a_503(
    start_gateway: StartGateway, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = await admin_gateway(start_gateway)
    key = await gateway.key(await gateway.group("team"))
    rename_table(tmp_path / "parley.db", "usage_daily")
    rename_table(tmp_path / "parley.db", "groups")

    with caplog.at_level(logging.INFO):
        for path, token in (
            ("/v1/dashboard/billing/usage", key),
            ("/admin/groups", ADMIN),
        ):
            status, reply = await call(gateway, "GET", path, token)
            assert (status, reply) == (500, INTERNAL), path
            (line,) = fault_lines(caplog, path)
            message = line.getMessage()
            assert "the database refused the query: no such table" in message, message
            assert line.exc_info is None and "SELECT" not in message and "[SQL" not in message

        async with browser_session() as session:
            assert (await login(session, gateway.base_url, ADMIN)).status == 303
            async with session.get(f"{gateway.base_url}/admin/ui/groups") as page:
                assert page.status == 500 and page.content_type == "text/html"
                assert "retry-after" not in page.headers
                assert "a fault in Parley" in await page.text()
        (line,) = fault_lines(caplog, "/admin/ui/groups")
        assert "no such table: groups" in line.getMessage() and line.exc_info is None

        assert (await chat_status(gateway, key))[0] == 200
    assert not any("unavailable" in r.getMessage() for r in fault_lines(caplog, "/"))
