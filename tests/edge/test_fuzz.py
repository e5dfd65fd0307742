"""A bounded schemathesis run against a live ``parley serve`` and a fake engine.

Every operation in ``GET /openapi.json`` gets valid and invalid requests (``EXAMPLES``
of each, no shrinking: about 20 s on an idle machine). Every reply must be below 500,
match the described content type, and be the OpenAI envelope (Anthropic's error shape on
the Messages API) whenever it is not a success; afterwards the server's own output must
hold no secret and no traceback. The /v1 operations run before /admin's, which may revoke
the key or tighten its group.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
import requests
import schemathesis
from aiohttp import web
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import checks

from parley.admin.site import is_dashboard
from parley.app import create_app
from parley.openapi import PARTS, document
from parley.settings import Settings
from tests.process.calls import gateway_config
from tests.process.procs import Processes

ADMIN_TOKEN = "admin-token-2b7e151628aed2a6abf71588"
CHANNEL_KEY = "sk-channel-3c6ef372fe94f82ba54ff53a"
EXAMPLES = 8
ENVELOPE_FIELDS = {"message", "type", "param", "code"}
CHECKS = [
    checks.not_a_server_error,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.status_code_conformance,
]


def check_reply(case: schemathesis.Case, reply: schemathesis.Response) -> None:
    where = f"{case.method} {case.formatted_path} -> {reply.status_code}"
    assert reply.status_code < 500, f"{where}: {reply.text[:300]}"
    if reply.status_code >= 300:
        content_type = reply.headers.get("content-type", [""])[0]
        assert content_type.startswith("application/json"), where
        body = orjson.loads(reply.content)
        if case.formatted_path.startswith("/v1/messages"):
            assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, where
            assert isinstance(body["error"]["message"], str) and body["error"]["message"], where
            return
        error = body["error"]
        assert set(error) == ENVELOPE_FIELDS, where
        assert isinstance(error["message"], str) and error["message"], where


def fuzz(operation: Any, mode: schemathesis.GenerationMode, base_url: str, token: str) -> int:
    calls = [0]
    session = requests.Session()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    def run(case: schemathesis.Case, data: st.DataObject) -> None:
        reply = case.call(
            base_url=base_url,
            session=session,
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        calls[0] += 1
        check_reply(case, reply)
        case.validate_response(reply, checks=CHECKS)

    run()
    session.close()
    return calls[0]


@pytest.mark.timeout(300)  # about 20 s on an idle machine; eight suites share two cores here
def test_every_described_operation_survives_fuzzing_without_a_5xx_or_a_leak(
    procs: Processes, tmp_path: Path
) -> None:
    config = gateway_config(
        procs.engine(), tmp_path, server={"access_log": True}, admin={"token": ADMIN_TOKEN}
    )
    config["channels"][0]["api_key"] = CHANNEL_KEY
    server = procs.serve(config)
    key = server.create_key()

    schema = schemathesis.openapi.from_url(f"{server.base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda op: op.path.startswith("/admin"))
    # text, messages, message batches, responses, embeddings, moderations, rerank, images,
    # files, batches, speech, voices, transcription, realtime, admin (groups, keys, usage,
    # requests, channels, models, accounts, audit, voices)
    assert len(operations) == 91
    calls = 0
    for operation in operations:
        token = ADMIN_TOKEN if operation.path.startswith("/admin") else key
        for mode in schemathesis.GenerationMode:
            calls += fuzz(operation, mode, server.base_url, token)
    assert calls > len(operations) * 2

    assert server.terminate() == 0
    log = server.output()
    for secret in (key, ADMIN_TOKEN, CHANNEL_KEY):
        assert secret not in log
    assert "Traceback" not in log


def served(app: web.Application) -> set[tuple[str, str]]:
    """(method, path) for every route of ``app`` and its sub-apps (HEAD and the catch-alls
    of ``parley.edge.routing`` aside; a sub-app's paths already carry its prefix)."""
    routes: set[tuple[str, str]] = set()
    for resource in app.router.resources():
        info = resource.get_info()
        if "app" in info:
            routes |= served(info["app"])
            continue
        for route in resource:
            if route.method not in ("HEAD", "*"):
                routes.add((route.method.lower(), resource.canonical))
    return routes


def test_the_description_names_exactly_the_v1_and_admin_routes_the_app_serves() -> None:
    routes = served(create_app(Settings()))
    api = {
        (m, p)
        for m, p in routes
        if p.startswith(("/v1/", "/v2/", "/admin/")) and not is_dashboard(p)  # HTML pages
    }
    described = {(m, p) for p, item in document()["paths"].items() for m in item}
    assert described == api
    assert ("get", "/openapi.json") in routes


def test_a_path_described_by_two_parts_is_refused() -> None:
    twice = ModuleType("twice")
    twice.PATHS = {"/v1/models": {}}  # type: ignore[attr-defined]
    twice.SCHEMAS = {}  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="`/v1/models` is described twice"):
        document((*PARTS, twice))
