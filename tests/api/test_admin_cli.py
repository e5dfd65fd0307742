"""The CLI goes through the same admin service: group names, budgets of zero alike in
create and update, disable/enable, and the operator's usage report in three formats."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from parley.cli import cli
from parley.domain.audit import AuditEntry
from parley.domain.keys import KeyRecord, digest
from parley.domain.usage import UsageRecord
from parley.domain.voices import Clone
from parley.store.sql import open_store
from tests.records import usage_record

Invoke = Callable[..., str]


@pytest.fixture
def run(tmp_path: Path) -> Invoke:
    config = tmp_path / "parley.yaml"
    config.write_text(f"database:\n  url: sqlite:///{tmp_path / 'parley.db'}\n")
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> str:
        result = runner.invoke(cli, ["--config", str(config), *args])
        assert result.exit_code == code, result.output
        # stdout alone on success (stderr names the database); both when refused
        return result.stdout if code == 0 else result.output

    return invoke


def test_group_names_are_checked_and_say_which_characters(run: Invoke) -> None:
    out = run("groups", "create", "has space", code=2)
    assert "letters A-Z and a-z, digits, '.', '_' and '-'" in out
    assert "acme.prod-1\t" in run("groups", "create", "acme.prod-1")


def test_a_zero_budget_is_the_same_in_create_and_update(run: Invoke) -> None:
    assert "budget=$0\t" in run("groups", "create", "a", "--budget-usd", "0")
    run("groups", "create", "b", "--budget-usd", "3")
    assert "budget=$0\t" in run("groups", "update", "b", "--budget-usd", "0")
    assert "budget=-\t" in run("groups", "update", "b", "--budget-usd", "none")
    assert "must be zero or more" in run("groups", "update", "b", "--budget-usd", "-1", code=2)


def test_keys_are_listed_and_revoked_with_their_groups_name(run: Invoke) -> None:
    run("groups", "create", "alpha")
    run("groups", "create", "beta")
    run("keys", "create", "--group", "beta", "--name", "laptop")
    (line,) = run("keys", "list").splitlines()
    key_id, _, group, state, *_, name = line.split("\t")
    assert (group, state, name) == ("group=beta", "active", "laptop")
    revoked = run("keys", "revoke", key_id).split("\t")
    assert (revoked[2], revoked[3]) == ("group=beta", "revoked")


def test_disable_enable_and_an_unknown_group_for_a_key(run: Invoke) -> None:
    run("groups", "create", "team")
    assert run("groups", "disable", "team").rstrip().endswith("\tdisabled")
    assert not run("groups", "enable", "team").rstrip().endswith("\tdisabled")
    out = run("keys", "create", "--group", "nobody", code=2)
    assert "The groups are: team." in out


def _seed(tmp_path: Path, records: list[UsageRecord]) -> None:
    async def write() -> None:
        store = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
        await store.migrate()
        await store.record_usage(records)
        await store.close()

    asyncio.run(write())


def test_usage_report_across_groups_in_three_formats(run: Invoke, tmp_path: Path) -> None:
    run("groups", "create", "alpha")
    run("groups", "create", "beta")
    now = datetime.now(UTC)
    _seed(
        tmp_path,
        [
            usage_record("1", created_at=now, group_id=1, cost=2_000_000),
            usage_record("2", created_at=now, group_id=1, cost=2_000_000),
            usage_record("3", created_at=now, group_id=2, model="other", cost=1_000_000),
        ],
    )
    table = run("usage", "report").splitlines()
    assert table[0].split() == ["group", "model", "requests", "tokens", "cost_usd"]
    assert table[1].split() == ["alpha", "chat-large", "2", "30", "0.004000"]
    assert table[-1].split() == ["total", "3", "45", "0.005000"]
    csv = run("usage", "report", "--group", "beta", "--by", "day,model", "--format", "csv")
    assert csv.splitlines()[1].startswith(f"{now.date().isoformat()},other,1,10,0,0,5,15,")
    report = json.loads(run("usage", "report", "--model", "chat-large", "--format", "json"))
    assert report["total"]["requests"] == 2 and report["data"][0]["group"] == "alpha"
    assert "'since' must be a date" in run("usage", "report", "--since", "May 1", code=2)
    assert "No group named 'nobody'" in run("usage", "report", "--group", "nobody", code=2)


def test_voices_list_shows_every_groups_clones_and_filters(run: Invoke, tmp_path: Path) -> None:
    run("groups", "create", "alpha")
    run("groups", "create", "beta")

    async def write() -> None:
        store = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
        groups = {group.name: group.id for group in await store.list_groups()}
        for name, model, label in (("alpha", "tts-pro", "Anna"), ("beta", "tts-max", "Bert")):
            gid = groups[name]
            clone = Clone(
                gid,
                model,
                label,
                f"g{gid}__{label}",
                f"g{gid}__{label.lower()}",
                "omni",
                4_250,
                datetime(2026, 11, 1, tzinfo=UTC),
            )
            await store.add_clone(clone)
        await store.close()

    asyncio.run(write())
    lines = run("voices", "list").splitlines()
    assert [line.split("\t")[0] for line in lines] == ["alpha", "beta"]
    assert lines[0].split("\t")[1:] == [
        "tts-pro",
        "g1__Anna",
        "Anna",
        "2026-11-01T00:00:00+00:00",
        "4.2s",
    ]
    assert run("voices", "list", "--group", "beta").count("\n") == 1
    assert "g2__Bert" in run("voices", "list", "--model", "tts-max")
    assert run("voices", "list", "--model", "tts-none") == ""
    assert "No group named 'nobody'" in run("voices", "list", "--group", "nobody", code=2)


def _stored(tmp_path: Path) -> tuple[list[KeyRecord], list[AuditEntry]]:
    async def read() -> tuple[list[KeyRecord], list[AuditEntry]]:
        store = await open_store(f"sqlite:///{tmp_path / 'parley.db'}")
        try:
            return await store.list_keys(), await store.list_audit()
        finally:
            await store.close()

    return asyncio.run(read())


def test_keys_edit_changes_what_the_admin_api_changes(run: Invoke, tmp_path: Path) -> None:
    run("groups", "create", "team", "--models", "chat-a,chat-b,chat-c")
    run("keys", "create", "--group", "team", "--name", "laptop")
    out = run(
        "keys", "edit", "1", "--name", "ci runner", "--rpm", "30", "--tpm", "9000",
        "--models", "chat-b, chat-a", "--budget-usd", "2.5", "--expires-at", "2030-01-31T00:00",
    )  # fmt: skip
    line, settings = out.splitlines()
    assert line.split("\t")[-1] == "ci runner" and "expires=2030-01-31T00:00:00+00:00" in line
    assert settings == "rpm=30\ttpm=9000\tbudget=$2.5\tmodels=chat-a,chat-b"
    (record,), audit = _stored(tmp_path)
    assert (record.name, record.quota.rpm, record.quota.tpm) == ("ci runner", 30, 9000)
    assert record.models == frozenset({"chat-a", "chat-b"}) and record.budget_nanos == 2_500_000_000
    assert record.expires_at == datetime(2030, 1, 31, tzinfo=UTC)
    assert (audit[0].action, audit[0].actor) == ("key.update", "cli")
    assert audit[0].detail["budget_usd"] == 2.5

    # 'none' hands a field back to the group; an option left out is left as it is
    cleared = run("keys", "edit", "1", "--rpm", "none", "--models", "all", "--expires-at", "none")
    assert cleared.splitlines()[1] == "rpm=-\ttpm=9000\tbudget=$2.5\tmodels=*"
    assert "expires=-" in cleared.splitlines()[0]
    later = run("keys", "edit", "1", "--expires-in-days", "10").splitlines()[0]
    (record,), _ = _stored(tmp_path)
    assert record.expires_at is not None and f"expires={record.expires_at.date()}" in later
    assert record.quota.rpm is None and record.models is None and record.name == "ci runner"


def test_keys_edit_refuses_as_the_admin_api_does(run: Invoke, tmp_path: Path) -> None:
    run("groups", "create", "team")
    run("keys", "create", "--group", "team")
    assert "nothing to change" in run("keys", "edit", "1", code=2)
    assert "No key with id '9'" in run("keys", "edit", "9", "--name", "x", code=2)
    assert "'expires_at' must be an ISO 8601 time" in run(
        "keys", "edit", "1", "--expires-at", "next week", code=2
    )
    assert "'name' must be a string of at most 200" in run(
        "keys", "edit", "1", "--name", "x" * 201, code=2
    )
    assert "must be greater than zero" in run("keys", "edit", "1", "--rpm", "0", code=2)
    assert "not both" in run(
        "keys", "edit", "1", "--expires-in-days", "3", "--expires-at", "2030-01-01", code=2
    )
    (record,), audit = _stored(tmp_path)
    assert record.name == "" and record.expires_at is None
    assert [entry.action for entry in audit] == ["key.create", "group.create"]


def test_keys_rotate_prints_a_new_secret_and_keeps_the_old_for_the_grace(
    run: Invoke, tmp_path: Path
) -> None:
    run("groups", "create", "team")
    old = run("keys", "create", "--group", "team", "--name", "laptop").strip()
    began = datetime.now(UTC)
    new = run("keys", "rotate", "1", "--grace", "90m").strip()
    assert new != old and new.startswith(old[:3])
    (record,), audit = _stored(tmp_path)
    assert record.digest == digest(new) and record.previous_digest == digest(old)
    assert record.previous_until is not None
    assert timedelta(minutes=89) < record.previous_until - began < timedelta(minutes=91)
    assert record.name == "laptop" and record.id == 1
    assert (audit[0].action, audit[0].actor) == ("key.rotate", "cli")
    assert old not in str(audit[0].detail) and new not in str(audit[0].detail)

    # the default grace is the API's hour; 0 ends the old secret at once
    run("keys", "rotate", "1")
    (record,), _ = _stored(tmp_path)
    assert record.previous_until is not None
    assert timedelta(minutes=59) < record.previous_until - datetime.now(UTC) <= timedelta(hours=1)
    run("keys", "rotate", "1", "--grace", "0")
    (record,), _ = _stored(tmp_path)
    assert record.previous_until is not None and not record.previous_valid_at(datetime.now(UTC))

    assert "at most 30d" in run("keys", "rotate", "1", "--grace", "31d", code=2)
    assert "is not a duration" in run("keys", "rotate", "1", "--grace", "an hour", code=2)
    assert "No key with id '5'" in run("keys", "rotate", "5", code=2)


def test_keys_create_takes_the_keys_own_models_and_budget(run: Invoke, tmp_path: Path) -> None:
    run("groups", "create", "team")
    run("keys", "create", "--group", "team", "--models", "chat-a,chat-b", "--budget-usd", "0.5")
    run("keys", "create", "--group", "team")
    first, second = sorted(_stored(tmp_path)[0], key=lambda record: record.id)
    assert first.models == frozenset({"chat-a", "chat-b"}) and first.budget_nanos == 500_000_000
    assert second.models is None and second.budget_nanos is None
    refused = run("keys", "create", "--group", "team", "--budget-usd", "2000000000", code=2)
    assert "'budget_usd' must be a number from 0 to 1000000000" in refused
    assert len(_stored(tmp_path)[0]) == 2


def test_an_account_for_single_sign_on_is_made_without_a_password(run: Invoke) -> None:
    assert run("admin", "create", "ada", "--role", "viewer", "--sso").startswith("ada\tviewer\t")
    assert "ada\tviewer\tactive" in run("admin", "list")
    refused = run("admin", "create", "sso", "--role", "viewer", "--sso", code=2)
    assert "not one of" in refused


def test_a_groups_content_policy_is_set_from_the_shell_and_audited(
    run: Invoke, tmp_path: Path
) -> None:
    assert "content=" not in run("groups", "create", "plain")  # off: nothing kept, not shown
    assert run("groups", "create", "kept", "--content-policy", "metadata").endswith(
        "content=metadata/30d\n"
    )
    line = run(
        "groups", "update", "kept", "--content-policy", "redacted", "--content-retention-days", "7"
    )
    assert line.endswith("content=redacted/7d\n")
    assert "content=redacted/7d" in run("groups", "update", "kept", "--rpm", "5")  # kept
    refused = run("groups", "create", "x", "--content-policy", "all", code=2)
    assert "'all' is not one of 'off', 'metadata', 'redacted', 'full'" in refused
    assert "content=" not in run("groups", "update", "kept", "--content-policy", "off")
    _, audit = _stored(tmp_path)
    updates = [entry.detail for entry in audit if entry.action == "group.update"]  # newest first
    assert [(u["content_policy"], u["content_retention_days"]) for u in updates] == [
        ("off", 7),
        ("redacted", 7),
        ("redacted", 7),
    ]
