"""Batches and files as the operator and a group-admin see them: ``/admin/batches`` with
progress and the cost its lines have in the request log, a cancel audited, another
group's batch not found for a group-admin, files without their content, the request log's
batch lines marked and filtered, and the lane's queue on ``/metrics``."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from parley.domain.pricing import nanos_to_usd
from tests.api.admin_client import ADMIN, CHAT
from tests.api.harness import Gateway, StartGateway, call, default_config, records, starting
from tests.api.test_batches import chat_line, requests_seen, settled, submitted
from tests.upstreams.openai_compatible import Behaviour, FakeEngine


@pytest.fixture
async def gateway(engine: FakeEngine, database_url: str, tmp_path: Path) -> AsyncIterator[Gateway]:
    def config() -> dict[str, Any]:
        settings = default_config(engine.base_url, tmp_path)
        settings["database"] = {"url": database_url}
        settings["admin"] = {"token": ADMIN}
        settings["models"][0]["prices"]["batch_discount"] = "0.5"
        settings["batches"] = {"poll_seconds": 0.05, "per_channel": 2, "adaptive": False}
        return settings

    start: StartGateway
    async with starting(config) as start:
        yield await start()


async def admin(gateway: Gateway, method: str, path: str, **request: Any) -> tuple[int, Any]:
    return await call(gateway, method, path, ADMIN, **request)


async def test_batches_show_progress_and_the_cost_of_their_lines(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    await gateway.group("quiet")
    client = gateway.client(key)
    assert (await call(gateway, "POST", "/v1/chat/completions", key, json=CHAT))[0] == 200
    batch = await submitted(client, [chat_line(f"l{n}", f"text {n}") for n in range(3)])
    done = await settled(client, batch.id)
    assert done.status == "completed"

    logged = [r for r in await records(gateway) if r.request_id.startswith("batch_req_")]
    assert len(logged) == 3 and all(r.cost_nanos > 0 for r in logged)
    status, listed = await admin(gateway, "GET", "/admin/batches")
    assert status == 200, listed
    [seen] = listed["data"]
    assert seen["id"] == batch.id and seen["group"] == "team" and seen["kind"] == "openai"
    assert seen["status"] == "completed" and seen["progress"] == 1.0
    assert seen["request_counts"] == {"total": 3, "completed": 3, "failed": 0}
    assert seen["cost_usd"] == nanos_to_usd(sum(r.cost_nanos for r in logged))
    assert seen["billed_lines"] == 3 and seen["completed_at"] and not seen["cancellable"]
    assert seen["output_file_id"] == done.output_file_id
    assert (await admin(gateway, "GET", f"/admin/batches/{batch.id}"))[1] == seen

    assert (await admin(gateway, "GET", "/admin/batches?group=quiet"))[1]["data"] == []
    assert (await admin(gateway, "GET", "/admin/batches?status=failed"))[1]["data"] == []
    assert len((await admin(gateway, "GET", "/admin/batches?status=completed"))[1]["data"]) == 1
    status, error = await admin(gateway, "GET", "/admin/batches?status=done")
    assert status == 400 and error["error"]["param"] == "status"
    status, error = await admin(gateway, "GET", "/admin/batches?group=nobody")
    assert status == 404, error
    status, error = await admin(gateway, "GET", "/admin/batches/batch_000000000000000000000000")
    assert status == 404 and error["error"]["param"] == "batch_id"

    status, files = await admin(gateway, "GET", "/admin/files")
    assert status == 200, files
    by_id = {f["id"]: f for f in files["data"]}
    assert set(by_id) == {batch.input_file_id, done.output_file_id}
    made = by_id[batch.input_file_id]
    assert (made["group"], made["purpose"], made["filename"]) == ("team", "batch", "in.jsonl")
    assert made["bytes"] > 0 and "content" not in made and "text 0" not in str(files)
    assert (await admin(gateway, "GET", "/admin/files?group=quiet"))[1]["data"] == []


async def test_the_request_log_marks_and_filters_batch_lines(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("team"))
    client = gateway.client(key)
    assert (await call(gateway, "POST", "/v1/chat/completions", key, json=CHAT))[0] == 200
    first = await settled(client, (await submitted(client, [chat_line("a", "one")])).id)
    second = await settled(client, (await submitted(client, [chat_line("b", "two")])).id)
    await gateway.flush_usage()

    _, every = await admin(gateway, "GET", "/admin/requests")
    marks = sorted(str(line["batch_id"]) for line in every["data"])
    assert marks == sorted([first.id, second.id, "None"])
    _, batched = await admin(gateway, "GET", "/admin/requests?batch=true")
    assert sorted(line["batch_id"] for line in batched["data"]) == sorted([first.id, second.id])
    _, one = await admin(gateway, "GET", f"/admin/requests?batch={first.id}")
    assert [line["batch_id"] for line in one["data"]] == [first.id]
    status, text = await admin(gateway, "GET", f"/admin/requests?batch={second.id}&format=csv")
    header, row = text.splitlines()
    assert header.endswith(",estimated,batch_id,session_id") and row.endswith(f",{second.id},")
    status, error = await admin(gateway, "GET", "/admin/requests?batch=yes")
    assert status == 400 and error["error"]["param"] == "batch"


async def test_an_operators_cancel_is_audited_and_the_queue_is_on_metrics(
    gateway: Gateway, engine: FakeEngine
) -> None:
    client = gateway.client(await gateway.key(await gateway.group("team")))
    engine.behaviour = Behaviour(hang=0.3)
    batch = await submitted(client, [chat_line(f"l{n}", f"text {n}") for n in range(20)])
    await requests_seen(engine, 1)
    queued = await _metric(gateway, "parley_batch_lines_queued", lambda value: value > 0)
    assert queued <= 20  # the lines not yet sent, at the lane's last look

    status, cancelling = await admin(gateway, "POST", f"/admin/batches/{batch.id}/cancel")
    assert status == 200 and cancelling["status"] == "cancelling", cancelling
    done = await settled(client, batch.id)
    assert done.status == "cancelled" and len(engine.requests) < 20
    status, again = await admin(gateway, "POST", f"/admin/batches/{batch.id}/cancel")
    assert status == 200 and again["status"] == "cancelled"
    _, audit = await admin(gateway, "GET", "/admin/audit?action=batch.cancel")
    [entry] = audit["data"]
    assert entry["target"] == batch.id and entry["detail"]["group"] == "team"

    ended = await settled(client, (await submitted(client, [chat_line("x", "late")])).id)
    status, error = await admin(gateway, "POST", f"/admin/batches/{ended.id}/cancel")
    assert status == 409, error
    assert await _metric(gateway, "parley_batch_lines_queued", lambda value: value == 0) == 0


async def test_a_group_admin_sees_its_groups_batches_alone(gateway: Gateway) -> None:
    mine = gateway.client(await gateway.key(await gateway.group("acme")))
    theirs = gateway.client(await gateway.key(await gateway.group("zeta")))
    my_batch = await settled(mine, (await submitted(mine, [chat_line("a", "mine")])).id)
    their_batch = await submitted(theirs, [chat_line("b", "theirs")])
    body = {"name": "gina", "role": "group-admin", "group": "acme", "password": "gina-pw-12345"}
    status, account = await admin(gateway, "POST", "/admin/accounts", json=body)
    assert status == 201, account
    gina = {"Authorization": "Basic " + _basic("gina", "gina-pw-12345")}

    async def as_gina(method: str, path: str) -> tuple[int, Any]:
        return await call(gateway, method, path, None, headers=gina)

    status, listed = await as_gina("GET", "/admin/batches")
    assert status == 200 and [b["id"] for b in listed["data"]] == [my_batch.id]
    assert (await as_gina("GET", f"/admin/batches/{my_batch.id}"))[0] == 200
    status, missing = await as_gina("GET", f"/admin/batches/{their_batch.id}")
    assert status == 404 and their_batch.id in missing["error"]["message"]
    assert (await as_gina("GET", "/admin/batches?group=zeta"))[0] == 404
    _, files = await as_gina("GET", "/admin/files")
    assert {f["group"] for f in files["data"]} == {"acme"}
    status, refused = await as_gina("POST", f"/admin/batches/{their_batch.id}/cancel")
    assert status == 403, refused


def _basic(name: str, password: str) -> str:
    return base64.b64encode(f"{name}:{password}".encode()).decode()


async def _metric(gateway: Gateway, name: str, wanted: Callable[[float], bool]) -> float:
    """The gauge's value once ``wanted`` holds of it (the lane counts at each look)."""
    value = None
    for _ in range(200):
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{gateway.base_url}/metrics") as got,
        ):
            for line in (await got.text()).splitlines():
                if line.startswith(f"{name} "):
                    value = float(line.split()[1])
        if value is not None and wanted(value):
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} on /metrics is {value}")
