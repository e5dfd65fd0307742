"""The request log in the store, the same on SQLite and PostgreSQL: refusals are kept
beside the calls but never reach the rollups; lines come back newest first with their
key's label and prefix and their group's name, filtered, one cursor page at a time."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from parley.domain.requests import RequestQuery, StatusFilter
from parley.domain.usage import UsageRecord
from parley.store import admin_sql, requests_sql
from parley.store.sql import SqlStore, open_store
from tests.contract.test_store import digest_of, store, store_target  # noqa: F401
from tests.records import usage_record

BASE = datetime(2024, 3, 1, 12, tzinfo=UTC)


def refusal(
    request_id: str, at: datetime, *, status: int, code: str, **fields: object
) -> UsageRecord:
    record = usage_record(request_id, created_at=at, model="", prompt=0, completion=0, cost=0)
    return replace(record, status=status, error_code=code, admitted=False, **fields)


async def seeded(store: SqlStore) -> tuple[int, int, int]:  # noqa: F811
    team, other = await store.create_group("team"), await store.create_group("other")
    key = await store.create_key(team.id, name="ci", digest=digest_of("a"), prefix="pk-aaaa")
    theirs = await store.create_key(other.id, name="", digest=digest_of("b"), prefix="pk-bbbb")
    records = [
        replace(
            usage_record("c1", created_at=BASE, group_id=team.id, key_id=key.id, cost=700),
            model_requested="chat-alias",
            first_byte_ms=30,
        ),
        refusal(
            "r1",
            BASE + timedelta(seconds=1),
            status=429,
            code="rate_limit_exceeded",
            group_id=team.id,
            key_id=key.id,
            model="chat-large",
            model_requested="chat-large",
        ),
        refusal(
            "r2",
            BASE + timedelta(seconds=2),
            status=404,
            code="model_not_found",
            group_id=team.id,
            key_id=key.id,
            model_requested="no-such-model",
        ),
        replace(
            usage_record("c2", created_at=BASE + timedelta(seconds=3), key_id=theirs.id),
            group_id=other.id,
            status=502,
            error_code="bad_gateway",
        ),
    ]
    await store.record_usage(records)
    return team.id, key.id, other.id


async def test_refusals_are_logged_but_never_counted_as_usage(store: SqlStore) -> None:  # noqa: F811
    team, _, _ = await seeded(store)
    rollups = await store.daily_usage(team, date(2024, 3, 1), date(2024, 3, 2))
    assert [(row.model, row.requests, row.cost_nanos) for row in rollups] == [
        ("chat-large", 1, 700)
    ]
    assert await store.count_usage(team) == 1  # usage: the admitted call alone


async def test_lines_come_newest_first_with_their_key_and_group(store: SqlStore) -> None:  # noqa: F811
    await seeded(store)
    lines = await store.list_requests(RequestQuery())
    assert [line.record.request_id for line in lines] == ["c2", "r2", "r1", "c1"]
    refused = lines[1]
    assert (refused.group, refused.key_name, refused.key_prefix) == ("team", "ci", "pk-aaaa")
    assert refused.record.admitted is False
    assert refused.record.error_code == "model_not_found"
    assert refused.record.model_requested == "no-such-model"
    assert refused.record.created_at == BASE + timedelta(seconds=2)
    first = lines[3].record
    assert (first.model_requested, first.first_byte_ms, first.admitted) == ("chat-alias", 30, True)
    assert (lines[0].group, lines[0].key_prefix) == ("other", "pk-bbbb")
    found = await store.find_request("r1")
    assert found is not None and found.record.status == 429 and found.dialect == "openai"
    assert await store.find_request("nope") is None


async def test_filters(store: SqlStore) -> None:  # noqa: F811
    team, key, other = await seeded(store)

    async def ids(**fields: object) -> list[str]:
        lines = await store.list_requests(RequestQuery(**fields))  # type: ignore[arg-type]
        return [line.record.request_id for line in lines]

    assert await ids(group_id=team) == ["r2", "r1", "c1"]
    assert await ids(key_id=key) == ["r2", "r1", "c1"]
    assert await ids(group_id=other) == ["c2"]
    assert await ids(status=StatusFilter(400, 499)) == ["r2", "r1"]
    assert await ids(status=StatusFilter(429, 429)) == ["r1"]
    assert await ids(status=StatusFilter(500, 599)) == ["c2"]
    assert await ids(model="no-such-model") == ["r2"]
    assert await ids(model="chat-alias") == ["c1"]  # the name asked for
    assert await ids(model="chat-large") == ["c2", "r1", "c1"]  # or the model that answered
    second = BASE + timedelta(seconds=1)
    assert await ids(since=second, until=second + timedelta(seconds=2)) == ["r2", "r1"]


async def test_cursor_pages_cover_every_line_once(store: SqlStore) -> None:  # noqa: F811
    await seeded(store)
    same_time = [usage_record(f"t{n}", created_at=BASE + timedelta(seconds=1)) for n in range(3)]
    await store.record_usage(same_time)  # several lines in one instant: the id breaks ties
    seen: list[str] = []
    after = None
    while True:
        page = await store.list_requests(RequestQuery(limit=2, after=after))
        seen += [line.record.request_id for line in page]
        if len(page) < 2:
            break
        after = (page[-1].record.created_at, page[-1].record.request_id)
    assert seen == ["c2", "r2", "t2", "t1", "t0", "r1", "c1"]


async def test_sqlite_reads_failures_through_their_partial_index(tmp_path: Path) -> None:
    """SQLite uses a partial index only when the query repeats its condition word for
    word; a failure filter and the overview's count do, so neither scans the successes."""
    sqlite = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
    await sqlite.migrate()
    since = datetime(2024, 1, 1, tzinfo=UTC)

    def plans(conn: Connection) -> list[str]:
        statements = [
            requests_sql._select(RequestQuery(status=StatusFilter(404, 404))),
            requests_sql._select(RequestQuery(status=StatusFilter(400, 499))),
            admin_sql.failures_by_day_query(conn, since),
        ]
        return [
            repr(conn.execute(text(f"EXPLAIN QUERY PLAN {_inlined(conn, s)}")).all())
            for s in statements
        ]

    try:
        for plan in await sqlite.database.read(plans):
            assert "ix_usage_records_failed_status_created_at" in plan, plan
    finally:
        await sqlite.close()


def _inlined(conn: Connection, statement: Any) -> str:
    return str(statement.compile(conn, compile_kwargs={"literal_binds": True}))


async def test_a_reranks_search_units_are_kept_on_its_line(store: SqlStore) -> None:  # noqa: F811
    team = await store.create_group("team")
    key = await store.create_key(team.id, name="ci", digest=digest_of("a"), prefix="pk-aaaa")
    record = usage_record("rr1", created_at=BASE, group_id=team.id, key_id=key.id, cost=6)
    await store.record_usage([replace(record, endpoint="/v2/rerank", search_units=3)])
    line = await store.find_request("rr1")
    assert line is not None
    assert (line.record.endpoint, line.record.search_units) == ("/v2/rerank", 3)


async def test_the_price_a_call_was_billed_at_is_kept_on_its_line(store: SqlStore) -> None:  # noqa: F811
    team = await store.create_group("team")
    key = await store.create_key(team.id, name="ci", digest=digest_of("a"), prefix="pk-aaaa")
    tag = '{"input_per_1k":2000000,"output_per_1k":4000000}'
    billed = usage_record("p1", created_at=BASE, group_id=team.id, key_id=key.id, cost=6)
    failed = usage_record("p2", created_at=BASE, group_id=team.id, key_id=key.id, cost=0)
    await store.record_usage([replace(billed, price=tag), replace(failed, status=502)])
    found = [await store.find_request(request_id) for request_id in ("p1", "p2")]
    assert [line.record.price if line else "missing" for line in found] == [tag, None]


async def test_a_line_keeps_its_secrets_prefix_and_its_failure_after_a_rotation(
    store: SqlStore,  # noqa: F811
) -> None:
    """A line names the secret that made it, whatever the key's prefix is now; a line from
    before lines kept a prefix shows the key's only while the key was never rotated."""
    team = await store.create_group("team")
    key = await store.create_key(team.id, name="ci", digest=digest_of("a"), prefix="pk-first")
    plain = await store.create_key(team.id, name="", digest=digest_of("p"), prefix="pk-plain")
    old = replace(
        usage_record("old", created_at=BASE, group_id=team.id, key_id=key.id),
        key_prefix="pk-first",
        status=502,
        error_detail="The upstream answered 502: overloaded é",
    )
    unnamed = usage_record("unnamed", created_at=BASE, group_id=team.id, key_id=key.id)
    legacy = usage_record("legacy", created_at=BASE, group_id=team.id, key_id=plain.id)
    await store.record_usage([old, unnamed, legacy])
    rotated = await store.rotate_key(
        key.id, digest=digest_of("b"), prefix="pk-second", previous_until=BASE
    )
    assert rotated.former_prefixes == ("pk-first",)
    again = await store.rotate_key(
        key.id, digest=digest_of("c"), prefix="pk-third", previous_until=BASE
    )
    assert again.former_prefixes == ("pk-second", "pk-first")
    assert again.prefix_of(previous=True) == "pk-second" and again.known_by("PK-FIR")
    new = replace(
        usage_record("new", created_at=BASE + timedelta(seconds=1), group_id=team.id),
        key_id=key.id,
        key_prefix="pk-third",
    )
    await store.record_usage([new])

    lines = {line.record.request_id: line for line in await store.list_requests(RequestQuery())}
    assert lines["old"].key_prefix == "pk-first" and lines["new"].key_prefix == "pk-third"
    assert lines["old"].record.error_detail == "The upstream answered 502: overloaded é"
    assert lines["new"].record.error_detail is None
    assert lines["unnamed"].key_prefix is None  # its key was rotated since: not known
    assert lines["legacy"].key_prefix == "pk-plain"  # never rotated: its only prefix
    found = await store.find_request("old")
    assert found is not None and found.key_prefix == "pk-first"
