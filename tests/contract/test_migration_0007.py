"""Migration 0007 on SQLite and PostgreSQL: a database at 0005 with usage already kept
gets its per-key rollups filled from the raw records (admitted calls only, per UTC day),
its keys gain the new columns empty, and the migration goes down and up again."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, text

from parley.store.engine import MIGRATIONS
from parley.store.sql import SqlStore
from tests.contract.test_store import StoreTarget, store_target  # noqa: F401


def _migrate(connection: Connection, revision: str, *, down: bool = False) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.attributes["connection"] = connection
    if down:
        command.downgrade(config, revision)
    else:
        command.upgrade(config, revision)


def _seed(connection: Connection) -> None:
    now = datetime(2024, 3, 1, 12, tzinfo=UTC)
    connection.execute(
        text("INSERT INTO groups (id, name, created_at, updated_at) VALUES (1, 'team', :t, :t)"),
        {"t": now},
    )
    connection.execute(
        text(
            "INSERT INTO api_keys (id, group_id, name, digest, prefix, created_at, updated_at)"
            " VALUES (7, 1, 'ci', :d, 'pk-ci', :t, :t)"
        ),
        {"d": "ab" * 32, "t": now},
    )
    rows = [
        ("r1", datetime(2024, 3, 1, 23, 59, tzinfo=UTC), 100, True),
        ("r2", datetime(2024, 3, 1, 8, tzinfo=UTC), 50, True),
        ("r3", datetime(2024, 3, 2, 0, 1, tzinfo=UTC), 7, True),
        ("r4", datetime(2024, 3, 2, 1, tzinfo=UTC), 0, False),
    ]
    for request_id, at, cost, admitted in rows:
        connection.execute(
            text(
                "INSERT INTO usage_records (request_id, created_at, group_id, key_id, model,"
                " channel, endpoint, status, latency_ms, prompt_tokens, completion_tokens,"
                " characters, audio_ms, cost_nanos, estimated, admitted)"
                " VALUES (:id, :at, 1, 7, 'chat', 'c', '/v1/chat/completions', 200, 5,"
                " 10, 5, 0, 0, :cost, false, :admitted)"
            ),
            {"id": request_id, "at": at, "cost": cost, "admitted": admitted},
        )


async def test_0007_fills_the_per_key_rollups_and_goes_down_and_up(
    store_target: StoreTarget,  # noqa: F811
) -> None:
    store: SqlStore = await store_target.open()
    try:
        database = store.database
        await database.transaction(_migrate, "0005")
        await database.transaction(_seed)
        await database.transaction(_migrate, "head")
        rows = await store.key_usage_rollups(
            datetime(2024, 3, 1).date(), datetime(2024, 3, 3).date()
        )
        summary = [(r.day.day, r.key_id, r.group_id, r.requests, r.cost_nanos) for r in rows]
        assert summary == [(1, 7, 1, 2, 150), (2, 7, 1, 1, 7)]
        key = await store.find_key("ab" * 32)
        assert key is not None and key.models is None and key.budget_nanos is None
        assert key.previous_digest is None

        await database.transaction(_migrate, "0005")
        await database.transaction(_migrate, "head")
        assert (
            len(
                await store.key_usage_rollups(
                    datetime(2024, 3, 1).date(), datetime(2024, 3, 3).date()
                )
            )
            == 2
        )
    finally:
        await store.close()
