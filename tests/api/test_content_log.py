"""Content logging end to end: each group keeps what its policy says (``off`` nothing,
``metadata`` sizes and the finish reason, ``redacted`` masked text, ``full`` the text),
and no group's policy reaches another's calls; text is sealed at rest (the database's
own bytes never hold a prompt), read back through the admin API and the request log's
page by operators and the owner but not viewers, every view audited; content expires
and is purged; a full queue drops and counts on ``/metrics``, never failing a call."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import text, update

from parley.store.schema import call_contents
from tests.api.admin_client import ADMIN, browser_session, form_token
from tests.api.admin_client import call as admin
from tests.api.harness import Gateway, StartGateway
from tests.api.test_admin_accounts import PASSWORDS, ROLES, basic, dashboard_login
from tests.api.test_operator_telemetry import scrape, value
from tests.contract.test_store import POSTGRES_URL, postgres_execute

SECRET_KEY = Fernet.generate_key().decode()
MARKER = "marmalade7f3a"
EMAIL = "ada.lovelace@example.org"
PROMPT = f"remember {MARKER} and write to {EMAIL}"
POLICIES = ("off", "metadata", "redacted", "full")


def keeping(**content: Any) -> Any:
    def tweak(config: dict[str, Any]) -> None:
        config["admin"] = {"token": ADMIN, "secret_keys": [SECRET_KEY]}
        config["content"] = {"flush_seconds": 0.02, **content}
        config["metrics"] = {"enabled": True}

    return tweak


async def group_with_key(gateway: Gateway, name: str, policy: str, days: int = 30) -> str:
    body = {"name": name, "content_policy": policy, "content_retention_days": days}
    status, made = await admin(gateway, "POST", "/admin/groups", body=body)
    assert status == 201, made
    assert (made["content_policy"], made["content_retention_days"]) == (policy, days)
    status, key = await admin(gateway, "POST", "/admin/keys", body={"group": name})
    assert status == 201, key
    return str(key["key"])


async def chat(gateway: Gateway, key: str, *, stream: bool = False) -> tuple[str, str]:
    """The request id and the reply's text of one chat call."""
    body: dict[str, Any] = {
        "model": "chat-large",
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": stream,
    }
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{gateway.v1}/chat/completions", json=body, headers=headers) as reply,
    ):
        assert reply.status == 200, await reply.text()
        return reply.headers["x-request-id"], await reply.text()


def assembled(stream: str) -> str:
    """The text of a chat stream as its caller read it."""
    chunks = [orjson.loads(line[5:]) for line in stream.splitlines() if line.startswith("data: {")]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def database_files(folder: Path) -> list[bytes]:
    """The bytes of the SQLite database's files (the file, its WAL and shared memory)."""
    return [path.read_bytes() for path in folder.iterdir() if path.name.startswith("parley.db")]


async def written(gateway: Gateway) -> None:
    """Every finished call's content written (or dropped)."""
    await gateway.flush_usage()
    await asyncio.sleep(0.05)  # a stream's end is metered just after its last byte
    await gateway.services.contents.flush()


async def content(gateway: Gateway, request_id: str, **auth: Any) -> tuple[int, Any]:
    return await admin(gateway, "GET", f"/admin/requests/{request_id}/content", **auth)


async def test_each_group_keeps_what_its_policy_says_sealed_at_rest(
    start_gateway: StartGateway, tmp_path: Path
) -> None:
    gateway = await start_gateway(keeping())
    keys = {policy: await group_with_key(gateway, policy, policy) for policy in POLICIES}
    calls = {policy: await chat(gateway, keys[policy]) for policy in POLICIES}
    streamed_id, streamed = await chat(gateway, keys["full"], stream=True)
    await written(gateway)

    off_status, _ = await content(gateway, calls["off"][0])
    assert off_status == 404  # off: nothing kept, whatever other groups keep

    _, metadata = await content(gateway, calls["metadata"][0])
    assert metadata["policy"] == "metadata" and metadata["finish_reason"] == "stop"
    assert metadata["model"] == "chat-large" and metadata["status"] == 200
    assert metadata["request"]["bytes"] > len(PROMPT) and metadata["request"]["items"] == 1
    assert metadata["reply"]["bytes"] == len(calls["metadata"][1].encode())
    assert "text" not in metadata["request"] and "text" not in metadata["reply"]
    assert MARKER not in repr(metadata)

    _, redacted = await content(gateway, calls["redacted"][0])
    assert MARKER in redacted["request"]["text"] and EMAIL not in repr(redacted)
    assert "[email]" in redacted["request"]["text"] and "[email]" in redacted["reply"]["text"]

    _, full = await content(gateway, calls["full"][0])
    assert PROMPT in full["request"]["text"] and EMAIL in full["reply"]["text"]
    assert full["reply"]["text"] == calls["full"][1]
    _, stream = await content(gateway, streamed_id)
    assert stream["reply"]["streamed"] and stream["finish_reason"] == "stop"
    assert stream["reply"]["text"] == assembled(streamed)
    assert stream["reply"]["bytes"] == len(streamed.encode())

    # Sealed at rest: neither the rows nor any byte of the database files hold the text.
    store: Any = gateway.services.store
    rows = await store.database.read(
        lambda conn: conn.execute(text("SELECT policy, sealed, body FROM call_contents")).all()
    )
    assert {row.policy for row in rows} == {"metadata", "redacted", "full"}
    for row in rows:
        assert MARKER not in row.body and bool(row.sealed) == (row.policy != "metadata")
    await store.close()  # the WAL checkpointed into the file
    files = database_files(tmp_path)
    assert files and not any(MARKER.encode() in raw for raw in files)


async def test_only_operators_and_the_owner_read_content_and_every_view_is_audited(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(keeping())
    for name, role in ROLES.items():
        body = {"name": name, "role": role, "password": PASSWORDS[name]}
        assert (await admin(gateway, "POST", "/admin/accounts", body=body))[0] == 201
    key = await group_with_key(gateway, "kept", "full")
    request_id, _ = await chat(gateway, key)
    await written(gateway)

    assert (await content(gateway, request_id, token=None, headers=basic("vera")))[0] == 403
    for name in ("oscar", "olivia"):
        status, found = await content(gateway, request_id, token=None, headers=basic(name))
        assert status == 200 and MARKER in found["request"]["text"]
    _, line = await admin(gateway, "GET", f"/admin/requests/{request_id}")
    assert MARKER not in repr(line)  # the log line itself never holds content

    async with browser_session() as session:
        assert await dashboard_login(gateway, session, "vera", PASSWORDS["vera"]) == 303
        async with session.get(f"{gateway.base_url}/admin/ui/requests/{request_id}") as page:
            html = await page.text()
        assert 'data-content="hidden"' in html and MARKER not in html
    async with browser_session() as session:
        assert await dashboard_login(gateway, session, "oscar", PASSWORDS["oscar"]) == 303
        async with session.get(f"{gateway.base_url}/admin/ui/requests/{request_id}") as page:
            html = await page.text()
        assert 'data-content="shown"' in html and MARKER in html

    _, log = await admin(gateway, "GET", "/admin/audit?action=content.view")
    views = [entry for entry in log["data"] if entry["action"] == "content.view"]
    assert sorted(entry["actor"] for entry in views) == ["olivia", "oscar", "oscar"]
    assert {entry["target"] for entry in views} == {request_id}
    assert all(entry["detail"]["policy"] == "full" for entry in views)


async def test_content_expires_is_purged_and_follows_a_policy_change(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(keeping())
    key = await group_with_key(gateway, "kept", "full", days=2)
    old_id, _ = await chat(gateway, key)
    await written(gateway)
    stored = await gateway.services.store.find_content(old_id)
    assert stored is not None and (stored.expires_at - stored.created_at).days == 2

    status, changed = await admin(
        gateway, "PATCH", "/admin/groups/kept", body={"content_policy": "off"}
    )
    assert status == 200 and changed["content_retention_days"] == 2
    new_id, _ = await chat(gateway, key)
    await written(gateway)
    assert (await content(gateway, new_id))[0] == 404  # off from the change on
    assert (await content(gateway, old_id))[0] == 200  # kept for its retention

    store: Any = gateway.services.store
    past = update(call_contents).where(call_contents.c.request_id == old_id)
    await store.database.transaction(
        lambda conn: conn.execute(past.values(expires_at=stored.created_at))
    )
    assert (await content(gateway, old_id))[0] == 404  # expired: hidden before the purge
    assert await gateway.services.contents.purge() == 1
    rows = await store.database.read(
        lambda conn: conn.execute(text("SELECT count(*) FROM call_contents")).scalar()
    )
    assert rows == 0


async def test_a_full_queue_drops_and_counts_and_never_fails_a_call(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(keeping(queue_size=2, batch_size=100, flush_seconds=30))
    key = await group_with_key(gateway, "kept", "redacted")
    for _ in range(5):
        await chat(gateway, key)
    await gateway.flush_usage()
    contents = gateway.services.contents
    assert (contents.backlog, contents.dropped["queue_full"]) == (2, 3)
    metrics = await scrape(gateway)
    assert value(metrics, "parley_content_dropped_total", reason="queue_full") == 3
    assert value(metrics, "parley_content_queue_depth") == 2


async def test_a_policy_that_keeps_text_needs_a_key_to_seal_it(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(lambda c: c.update(admin={"token": ADMIN}))
    for policy in ("redacted", "full"):
        body = {"name": policy, "content_policy": policy}
        status, refused = await admin(gateway, "POST", "/admin/groups", body=body)
        assert status == 400 and refused["error"]["param"] == "content_policy"
    status, made = await admin(
        gateway, "POST", "/admin/groups", body={"name": "m", "content_policy": "metadata"}
    )
    assert status == 201 and made["content_policy"] == "metadata"
    for wrong in ({"content_policy": "all"}, {"content_retention_days": 0}):
        status, refused = await admin(gateway, "PATCH", "/admin/groups/m", body=wrong)
        assert status == 400 and refused["error"]["param"] == next(iter(wrong))


async def test_the_dashboard_sets_a_groups_content_policy_for_operators(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(keeping())
    for name in ("oscar", "vera"):
        body = {"name": name, "role": ROLES[name], "password": PASSWORDS[name]}
        assert (await admin(gateway, "POST", "/admin/accounts", body=body))[0] == 201
    await group_with_key(gateway, "team", "off")
    form_url = f"{gateway.base_url}/admin/ui/groups/team/content"
    async with browser_session() as session:
        assert await dashboard_login(gateway, session, "vera", PASSWORDS["vera"]) == 303
        csrf = await form_token(session, gateway.base_url)
        form = {"csrf": csrf, "content_policy": "full", "content_retention_days": "9"}
        async with session.post(form_url, data=form, allow_redirects=False) as refused:
            assert refused.status == 403
    async with browser_session() as session:
        assert await dashboard_login(gateway, session, "oscar", PASSWORDS["oscar"]) == 303
        csrf = await form_token(session, gateway.base_url)
        wrong = {"csrf": csrf, "content_policy": "full", "content_retention_days": "0"}
        async with session.post(form_url, data=wrong, allow_redirects=False) as page:
            assert page.status == 400 and "The retention" in await page.text()
        form = {"csrf": csrf, "content_policy": "full", "content_retention_days": "9"}
        async with session.post(form_url, data=form, allow_redirects=False) as done:
            assert done.status == 303
        async with session.get(f"{gateway.base_url}/admin/ui/groups/team") as page:
            assert "full, kept 9 days" in await page.text()
    _, group = await admin(gateway, "GET", "/admin/groups/team")
    assert (group["content_policy"], group["content_retention_days"]) == ("full", 9)


async def streamed_call(gateway: Gateway, key: str, path: str, body: dict[str, Any]) -> str:
    """The request id of one streamed call."""
    headers = {"Authorization": f"Bearer {key}", "x-api-key": key}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{gateway.v1}{path}", json=body, headers=headers) as reply,
    ):
        assert reply.status == 200, await reply.text()
        await reply.read()
        return reply.headers["x-request-id"]


async def test_streams_of_every_dialect_keep_their_assembled_text(
    start_gateway: StartGateway,
) -> None:
    gateway = await start_gateway(keeping())
    key = await group_with_key(gateway, "kept", "full")
    user = [{"role": "user", "content": PROMPT}]
    ids = {
        "messages": await streamed_call(
            gateway,
            key,
            "/messages",
            {"model": "chat-large", "max_tokens": 100, "messages": user, "stream": True},
        ),
        "responses": await streamed_call(
            gateway,
            key,
            "/responses",
            {"model": "chat-large", "input": PROMPT, "stream": True, "store": False},
        ),
        "completions": await streamed_call(
            gateway, key, "/completions", {"model": "chat-large", "prompt": PROMPT, "stream": True}
        ),
    }
    await written(gateway)
    for dialect, request_id in ids.items():
        status, found = await content(gateway, request_id)
        assert status == 200, (dialect, found)
        assert found["reply"]["streamed"] and not found["reply"]["truncated"], dialect
        assert found["reply"]["text"].split()[-3:] == PROMPT.split()[-3:], (dialect, found)
        assert found["finish_reason"], dialect


async def test_on_postgres_content_is_sealed_in_its_rows_and_read_back(
    start_gateway: StartGateway,
) -> None:
    database = f"content_{secrets.token_hex(6)}"
    try:
        await postgres_execute(f'CREATE DATABASE "{database}"')
    except (OSError, asyncpg.PostgresError) as error:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL} ({error})")
    url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{database}"

    def on_postgres(config: dict[str, Any]) -> None:
        keeping()(config)
        config["database"] = {"url": url}

    gateway = await start_gateway(on_postgres)
    try:
        kept = await group_with_key(gateway, "kept", "full")
        plain = await group_with_key(gateway, "plain", "off")
        kept_id, _ = await chat(gateway, kept, stream=True)
        plain_id, _ = await chat(gateway, plain)
        await written(gateway)
        _, found = await content(gateway, kept_id)
        assert PROMPT in found["request"]["text"] and found["reply"]["streamed"]
        assert (await content(gateway, plain_id))[0] == 404
        connection = await asyncpg.connect(url)
        try:
            rows = await connection.fetch("SELECT request_id, sealed, body FROM call_contents")
        finally:
            await connection.close()
        assert [(row["request_id"], row["sealed"]) for row in rows] == [(kept_id, True)]
        assert MARKER not in rows[0]["body"] and EMAIL not in rows[0]["body"]
    finally:
        await gateway.stop()
        await postgres_execute(f'DROP DATABASE "{database}" WITH (FORCE)')
