"""One gateway in front of every kind of chat upstream, each a real fake over HTTP: an
OpenAI-compatible engine (chat, and the Responses API served natively), Anthropic,
Gemini and Bedrock. What the usage and stream-end tests share: each test sets how one
upstream misbehaves (its ``behaviour``) and calls it in every caller's dialect.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.api.harness import CHANNEL_KEY, Config, Gateway, call, local_state, starting
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.bedrock import AwsKeys, FakeBedrock
from tests.upstreams.gemini import FakeGemini
from tests.upstreams.openai_compatible import FakeEngine

KEYS = AwsKeys("ASIAFAKEACCESS01", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYfake")
BEDROCK_MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
PRICES = {"input_per_1k": "0.00001", "output_per_1k": "0.015"}
"""Input nearly free, so a call's budget hold (its prompt's ceiling is its body's bytes
and more) stays small, and output at 15,000 nano-dollars a token."""
MODELS = ("openai", "openai-native", "openai-native-cut", "claude", "gemini", "bedrock")


@dataclass
class Upstreams:
    gateway: Gateway
    engine: FakeEngine
    anthropic: FakeAnthropic
    gemini: FakeGemini
    bedrock: FakeBedrock


def every_upstream_config(
    engine: FakeEngine,
    anthropic: FakeAnthropic,
    gemini: FakeGemini,
    bedrock: FakeBedrock,
    workdir: Path,
) -> Config:
    aws = {"region": "us-east-1", "access_key_id": KEYS.access_key_id,
           "secret_access_key": KEYS.secret_access_key}  # fmt: skip
    timeouts = {"connect": 2, "read": 5}
    return {
        **local_state(workdir),
        "channels": [
            {"name": "engine", "base_url": engine.base_url, "api_key": CHANNEL_KEY,
             "models": [{"name": "openai", "upstream": "upstream-chat"}], "timeouts": timeouts},
            {"name": "native", "base_url": engine.base_url, "api_key": CHANNEL_KEY,
             "responses": "native", "timeouts": timeouts,
             "models": [{"name": "openai-native", "upstream": "upstream-native"},
                        {"name": "openai-native-cut", "upstream": "upstream-native+cut-8"}]},
            {"name": "claude", "type": "anthropic", "base_url": anthropic.base_url,
             "api_key": CHANNEL_KEY, "models": [{"name": "claude", "upstream": "claude-up"}],
             "timeouts": timeouts},
            {"name": "google", "type": "gemini", "base_url": gemini.base_url,
             "api_key": CHANNEL_KEY, "timeouts": timeouts,
             "models": [{"name": "gemini", "upstream": "gemini-2.5-pro"}]},
            {"name": "aws", "type": "bedrock", "base_url": bedrock.endpoint,
             "aws": aws, "models": [{"name": "bedrock", "upstream": BEDROCK_MODEL}],
             "timeouts": timeouts},
        ],
        "models": [{"name": name, "context_window": 4096, "prices": PRICES} for name in MODELS],
    }  # fmt: skip


async def every_upstream(workdir: Path) -> AsyncIterator[Upstreams]:
    """A gateway and the four fakes behind it, stopped when the iteration ends."""
    async with (
        FakeEngine(api_key=CHANNEL_KEY) as engine,
        FakeAnthropic(api_key=CHANNEL_KEY) as anthropic,
        FakeGemini(api_key=CHANNEL_KEY) as gemini,
        FakeBedrock(credentials=KEYS, region="us-east-1") as bedrock,
    ):

        def config() -> Config:
            return every_upstream_config(engine, anthropic, gemini, bedrock, workdir)

        async with starting(config) as start:
            gateway = await start()
            yield Upstreams(gateway, engine, anthropic, gemini, bedrock)


HELLO = "hello there"


def request_for(dialect: str, model: str, *, stream: bool) -> tuple[str, dict[str, Any]]:
    """The path and body of one call in ``dialect`` (``chat``, ``responses``,
    ``messages``): "hello there", at most 16 tokens out."""
    if dialect == "chat":
        body: dict[str, Any] = {"messages": [{"role": "user", "content": HELLO}],
                                "max_tokens": 16}  # fmt: skip
        path = "/v1/chat/completions"
    elif dialect == "responses":
        body, path = {"input": HELLO, "max_output_tokens": 16, "store": False}, "/v1/responses"
    else:
        body = {"messages": [{"role": "user", "content": HELLO}], "max_tokens": 16}
        path = "/v1/messages"
    return path, {"model": model, "stream": stream, **body}


async def ask(
    gateway: Gateway, key: str, dialect: str, model: str, *, stream: bool
) -> tuple[int, Any]:
    """One call in ``dialect``: its status and its body (JSON, or a stream's text)."""
    path, body = request_for(dialect, model, stream=stream)
    return await call(gateway, "POST", path, key, json=body)
