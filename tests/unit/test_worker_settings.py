"""``parley serve --workers N``: one batch lane per SQLite database, in the first
worker; on PostgreSQL a lane in every worker (they share the work under leases)."""

from __future__ import annotations

from parley.cli.supervisor import worker_settings
from parley.settings import Settings


def test_only_the_first_worker_runs_the_batch_lane_on_sqlite() -> None:
    raw = Settings().model_dump(mode="json")
    first, *others = worker_settings(raw, 3)
    assert Settings.model_validate(first).batches.enabled
    assert [Settings.model_validate(o).batches.enabled for o in others] == [False, False]
    assert first == raw and others[0]["database"] == raw["database"]


def test_a_lane_switched_off_stays_off_in_every_worker() -> None:
    raw = Settings.model_validate({"batches": {"enabled": False}}).model_dump(mode="json")
    assert not any(Settings.model_validate(s).batches.enabled for s in worker_settings(raw, 2))


def test_every_worker_runs_a_batch_lane_on_postgresql() -> None:
    shared = {"database": {"url": "postgresql://parley@127.0.0.1:5432/parley"}}
    raw = Settings.model_validate(shared).model_dump(mode="json")
    assert all(Settings.model_validate(s).batches.enabled for s in worker_settings(raw, 3))
    raw["batches"]["enabled"] = False
    assert not any(Settings.model_validate(s).batches.enabled for s in worker_settings(raw, 3))
