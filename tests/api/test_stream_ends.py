"""An upstream stream that ends without its own end (OpenAI's ``[DONE]``, Anthropic's
``message_stop``, Gemini's ``finishReason``, Converse's ``messageStop``, a terminal
``response.*`` event) after it delivered content is a failure, not a success: the
caller gets its dialect's error end, the request log an upstream failure (502), and the
bill what was delivered, once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from tests.api.harness import records
from tests.api.upstreams_harness import Upstreams, ask, every_upstream
from tests.upstreams import anthropic, bedrock, gemini, openai_compatible


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    async for running in every_upstream(tmp_path):
        yield running


def cut(upstreams: Upstreams, model: str) -> str:
    """Make the upstream behind ``model`` end its stream after its first words (a few
    events in), without its end; the model to call."""
    if model == "claude":
        upstreams.anthropic.behaviour = anthropic.Behaviour(cut_after=5)
    elif model == "gemini":
        upstreams.gemini.behaviour = gemini.Behaviour(cut_after=2)
    elif model == "bedrock":
        upstreams.bedrock.behaviour = bedrock.Behaviour(cut_after=3)
    elif model == "openai":
        upstreams.engine.behaviour = openai_compatible.Behaviour(cut_after=3)
    else:
        return "openai-native-cut"  # its upstream model's name says where it stops
    return model


def data_events(text: str) -> list[str]:
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def chat_ended_by_an_error(text: str) -> None:
    events = data_events(text)
    assert events[-1] == "[DONE]"
    error = orjson.loads(events[-2])
    assert error["error"]["code"] == "bad_gateway"
    assert "ended its stream before" in error["error"]["message"]
    chunks = [orjson.loads(event) for event in events[:-2]]
    assert "echo:" in "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)  # never "stop"


def responses_ended_by_an_error(text: str) -> None:
    kinds = [orjson.loads(event)["type"] for event in data_events(text)]
    assert "response.output_text.delta" in kinds
    assert kinds[-2:] == ["error", "response.failed"]
    assert "response.completed" not in kinds and "response.incomplete" not in kinds


def messages_ended_by_an_error(text: str) -> None:
    events = [orjson.loads(event) for event in data_events(text)]
    kinds = [event["type"] for event in events]
    assert "content_block_delta" in kinds
    assert kinds[-1] == "error" and events[-1]["error"]["type"] == "api_error"
    assert "message_stop" not in kinds and "end_turn" not in text


ENDS = {
    "chat": chat_ended_by_an_error,
    "responses": responses_ended_by_an_error,
    "messages": messages_ended_by_an_error,
}
CASES = [
    ("chat", "openai"), ("chat", "claude"), ("chat", "gemini"), ("chat", "bedrock"),
    ("responses", "openai-native"), ("responses", "openai"), ("responses", "claude"),
    ("responses", "gemini"), ("responses", "bedrock"),
    ("messages", "claude"), ("messages", "openai"), ("messages", "gemini"),
    ("messages", "bedrock"),
]  # fmt: skip


@pytest.mark.parametrize(("dialect", "model"), CASES, ids=[f"{d}-{m}" for d, m in CASES])
async def test_a_stream_cut_short_is_an_upstream_failure_billed_for_what_it_gave(
    upstreams: Upstreams, dialect: str, model: str
) -> None:
    gateway = upstreams.gateway
    key = await gateway.key(await gateway.group("team"))
    status, text = await ask(gateway, key, dialect, cut(upstreams, model), stream=True)
    assert status == 200  # the reply had started
    ENDS[dialect](text)
    (record,) = await records(gateway)
    assert (record.status, record.error_code) == (502, "bad_gateway")
    assert record.completion_tokens > 0 and record.cost_nanos > 0  # what was delivered
