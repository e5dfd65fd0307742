"""Logs an operator can use: ``server.log_format: json`` makes every line of ``serve``
one JSON object, and the access log carries the request id, group, model, status,
latency and tokens, and never a key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.process.calls import MODEL, Chat, call, gateway_config, get
from tests.process.procs import Processes, eventually

WRONG_KEY = "pk-not-a-real-key-0123456789"


def json_lines(text: str) -> list[dict[str, Any]]:
    lines = [line for line in text.splitlines() if line.strip()]
    return [orjson.loads(line) for line in lines]  # fails on any line that is not JSON


def test_json_logs_and_an_access_log_with_what_the_meter_knew(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    config = gateway_config(engine, tmp_path, server={"access_log": True, "log_format": "json"})
    server = procs.serve(config)
    key = server.create_key()
    chat = call(Chat(server.v1, key, text="one two three"))
    assert chat.status == 200
    refused = call(Chat(server.v1, WRONG_KEY))
    assert refused.status == 401
    models = get(f"{server.v1}/models", key)
    assert models.status == 200

    def access_lines() -> list[dict[str, Any]]:
        return [e for e in json_lines(server.output()) if e["logger"] == "parley.access"]

    wanted = {reply.headers["x-request-id"] for reply in (chat, refused, models)}

    def logged_ids() -> set[str]:
        return {entry["request_id"] for entry in access_lines()}

    # /health probes log access lines too: wait for these three calls' own lines
    eventually(lambda: wanted <= logged_ids(), "the three calls' access log lines")
    by_id = {entry["request_id"]: entry for entry in access_lines()}
    metered = by_id[chat.headers["x-request-id"]]
    assert metered["group"] == "team"
    assert metered["model"] == MODEL
    assert metered["status"] == 200
    assert metered["channel"] == "engine"
    assert (metered["prompt_tokens"], metered["completion_tokens"]) == (3, 4)
    assert metered["latency_ms"] >= 0
    assert metered["path"] == "/v1/chat/completions"
    assert by_id[refused.headers["x-request-id"]]["status"] == 401
    assert by_id[models.headers["x-request-id"]]["group"] == "team"

    startup = json_lines(server.output())[0]
    assert startup["level"] == "info"
    assert "serving on" in startup["message"]
    assert key not in server.output()
    assert WRONG_KEY not in server.output()
    assert server.terminate() == 0
