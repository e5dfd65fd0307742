"""The CLI goes through the same admin service: group names, budgets of zero alike in
create and update, disable/enable, and the operator's usage report in three formats."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from parley.cli import cli
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
