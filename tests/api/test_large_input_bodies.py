"""Large embeddings and classic completion bodies are read in a body process.

An ``input`` or ``prompt`` of token-id arrays is millions of small objects at the body
limit: seconds of decoding and checking. ``server.large_body_bytes`` is set low here,
and in the serving process the decoder, the parsers and the token estimate of both
endpoints are made to fail: a large body is still answered, because a body process
read it, and the upstream gets what the caller sent. A refusal is a small body's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from parley.api import completions, embeddings
from tests.api.harness import CHANNEL_KEY, Config, Gateway, call, records, starting
from tests.api.upstreams_harness import KEYS, Upstreams, every_upstream_config
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.bedrock import FakeBedrock
from tests.upstreams.gemini import FakeGemini
from tests.upstreams.openai_compatible import FakeEngine

LARGE = 4096
TOKENS = [[7, 8, 9, 10] * 50 for _ in range(40)]
"""40 arrays of 200 token ids: a body of about 20 KB, over ``LARGE``."""


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    async with (
        FakeEngine(api_key=CHANNEL_KEY) as engine,
        FakeAnthropic(api_key=CHANNEL_KEY) as anthropic,
        FakeGemini(api_key=CHANNEL_KEY) as gemini,
        FakeBedrock(credentials=KEYS, region="us-east-1") as bedrock,
    ):

        def config() -> Config:
            written = every_upstream_config(engine, anthropic, gemini, bedrock, tmp_path)
            written["server"] = {"large_body_bytes": LARGE}
            written["channels"][0]["models"].append({"name": "embed", "upstream": "up-embed"})
            written["channels"][3]["models"].append(
                {"name": "gemini-embed", "upstream": "gemini-embedding-001"}
            )
            prices = {"input_per_1k": "0.00001"}
            written["models"] += [
                {"name": name, "kind": "embedding", "prices": prices}
                for name in ("embed", "gemini-embed")
            ]
            for model in written["models"]:
                model["context_window"] = 1_000_000
            return written

        async with starting(config) as start:
            yield Upstreams(await start(), engine, anthropic, gemini, bedrock)


@pytest.fixture
async def key(upstreams: Upstreams) -> str:
    gateway = upstreams.gateway
    return await gateway.key(await gateway.group("team"))


def _refuse(*_: Any, **__: Any) -> Any:
    raise AssertionError("a large body was read on the serving event loop")


@pytest.fixture
def no_decoding_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The serving process can neither decode, check nor estimate an embeddings or
    completion body (a body process, spawned before the test changed anything, can)."""
    for module in (embeddings, completions):
        for name in ("decode_json", "estimate_prompt"):
            monkeypatch.setattr(module, name, _refuse)
    monkeypatch.setattr(embeddings, "parse_embeddings", _refuse)
    monkeypatch.setattr(completions, "parse_completion", _refuse)


@pytest.fixture
def runs(upstreams: Upstreams, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of each function run in a body process, in order."""
    bodies = upstreams.gateway.services.bodies
    real = bodies.placed
    seen: list[str] = []

    async def recorded(
        group: int, where: int | None, function: Callable[..., Any], *args: Any
    ) -> Any:
        seen.append(function.__name__)
        return await real(group, where, function, *args)

    monkeypatch.setattr(bodies, "placed", recorded)
    return seen


async def post(gateway: Gateway, key: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    return await call(gateway, "POST", path, key, json=body)


@pytest.mark.usefixtures("no_decoding_here")
async def test_large_token_id_embeddings_are_read_apart_and_sent_as_they_came(
    upstreams: Upstreams, key: str, runs: list[str]
) -> None:
    body = {"model": "embed", "input": TOKENS, "encoding_format": "float"}
    status, answer = await post(upstreams.gateway, key, "/v1/embeddings", body)
    assert status == 200, answer
    assert len(answer["data"]) == len(TOKENS)
    sent = upstreams.engine.last_request.body
    assert (sent["model"], sent["input"]) == ("up-embed", TOKENS)
    assert runs == ["read_embeddings_apart"]
    (record,) = await records(upstreams.gateway)
    assert record.status == 200 and record.prompt_tokens == 40 * 200


@pytest.mark.usefixtures("no_decoding_here")
async def test_large_text_embeddings_reach_an_upstream_that_embeds_texts(
    upstreams: Upstreams, key: str, runs: list[str]
) -> None:
    texts = [f"sentence number {n} " * 20 for n in range(20)]
    body = {"model": "gemini-embed", "input": texts, "encoding_format": "float"}
    status, answer = await post(upstreams.gateway, key, "/v1/embeddings", body)
    assert status == 200, answer
    assert len(answer["data"]) == len(texts)
    sent = upstreams.gemini.last_request.body["requests"]
    assert [item["content"]["parts"][0]["text"] for item in sent] == texts
    assert runs == ["read_embeddings_apart"]


@pytest.mark.usefixtures("no_decoding_here")
async def test_large_token_ids_to_an_upstream_of_texts_are_refused_saying_so(
    upstreams: Upstreams, key: str
) -> None:
    body = {"model": "gemini-embed", "input": TOKENS}
    status, answer = await post(upstreams.gateway, key, "/v1/embeddings", body)
    assert status == 400, answer
    assert answer["error"]["param"] == "input"
    assert "embeds text" in answer["error"]["message"]


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_bad_embeddings_body_is_refused_as_a_small_one(
    upstreams: Upstreams, key: str
) -> None:
    body = {"model": "embed", "input": [*TOKENS, []]}
    status, answer = await post(upstreams.gateway, key, "/v1/embeddings", body)
    assert status == 400
    assert answer["error"]["param"] == "input"
    assert answer["error"]["type"] == "invalid_request_error"


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_token_id_completion_is_read_apart(
    upstreams: Upstreams, key: str, runs: list[str]
) -> None:
    body = {"model": "openai", "prompt": TOKENS, "max_tokens": 4}
    status, answer = await post(upstreams.gateway, key, "/v1/completions", body)
    assert status == 200, answer
    sent = upstreams.engine.last_request.body
    assert (sent["model"], sent["prompt"]) == ("upstream-chat", TOKENS)
    assert runs == ["read_completion_apart"]


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_one_text_completion_reaches_a_chat_upstream(
    upstreams: Upstreams, key: str, runs: list[str]
) -> None:
    prompt = "once upon a time " * 400
    body = {"model": "claude", "prompt": [prompt], "max_tokens": 4}
    status, answer = await post(upstreams.gateway, key, "/v1/completions", body)
    assert status == 200, answer
    assert answer["object"] == "text_completion"
    [turn] = upstreams.anthropic.requests[-1].body["messages"]
    content = turn["content"]
    text = content if isinstance(content, str) else "".join(part["text"] for part in content)
    assert text == prompt
    assert runs == ["read_completion_apart"]


@pytest.mark.usefixtures("no_decoding_here")
async def test_a_large_bad_completion_is_refused_naming_the_field(
    upstreams: Upstreams, key: str
) -> None:
    body = {"model": "openai", "prompt": TOKENS, "max_tokens": -1}
    status, answer = await post(upstreams.gateway, key, "/v1/completions", body)
    assert status == 400
    assert answer["error"]["param"] == "max_tokens"
