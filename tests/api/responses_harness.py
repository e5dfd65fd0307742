"""A gateway in front of an OpenAI-compatible fake engine and the Anthropic fake, for the
Responses API tests: each served model has a plain and a tool-calling variant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.api.harness import CHANNEL_KEY, Gateway, local_state, starting
from tests.upstreams.anthropic import FakeAnthropic
from tests.upstreams.openai_compatible import FakeEngine

PRICES = {"input_per_1k": "0.001", "output_per_1k": "0.002"}


def responses_config(engine_url: str, anthropic_url: str, workdir: Path) -> dict[str, Any]:
    return {
        **local_state(workdir),
        "channels": [
            {
                "name": "engine",
                "base_url": engine_url,
                "api_key": CHANNEL_KEY,
                "models": [
                    {"name": "gpt-like", "upstream": "upstream-chat"},
                    {"name": "gpt-tools", "upstream": "upstream-chat+tools"},
                    {"name": "gpt-short", "upstream": "upstream-chat"},
                    {"name": "gpt-reasoning", "upstream": "upstream-chat+reasoning"},
                    {"name": "gpt-broken", "upstream": "upstream-chat+error-after-2"},
                    {"name": "gpt-codex", "upstream": "upstream-chat+tools+reasoning"},
                ],
                "timeouts": {"connect": 2, "read": 5},
            },
            {
                "name": "native",
                "base_url": engine_url,
                "api_key": CHANNEL_KEY,
                "responses": "native",
                "models": [{"name": "gpt-native", "upstream": "upstream-native"}],
                "timeouts": {"connect": 2, "read": 5},
            },
            {
                "name": "claude",
                "type": "anthropic",
                "base_url": anthropic_url,
                "api_key": CHANNEL_KEY,
                "models": [
                    {"name": "claude-like", "upstream": "claude-up"},
                    {"name": "claude-tools", "upstream": "claude-up+tool"},
                    {"name": "claude-thinking", "upstream": "claude-up+thinking"},
                ],
                "timeouts": {"connect": 2, "read": 5},
            },
        ],
        "models": [
            {"name": "gpt-like", "aliases": ["gpt-alias"], "prices": PRICES, "vision": True},
            {"name": "gpt-tools", "prices": PRICES},
            {"name": "gpt-short", "prices": PRICES},
            {"name": "gpt-reasoning", "prices": PRICES},
            {"name": "gpt-broken", "prices": PRICES},
            {"name": "gpt-codex", "prices": PRICES},
            {"name": "gpt-native", "prices": PRICES},
            {"name": "claude-like", "prices": PRICES},
            {"name": "claude-tools", "prices": PRICES},
            {"name": "claude-thinking", "prices": PRICES},
        ],
    }


@dataclass
class Upstreams:
    engine: FakeEngine
    anthropic: FakeAnthropic
    gateway: Gateway


async def responses_gateway(workdir: Path) -> AsyncIterator[Upstreams]:
    async with (
        FakeEngine(api_key=CHANNEL_KEY) as engine,
        FakeAnthropic(api_key=CHANNEL_KEY) as anthropic,
        starting(lambda: responses_config(engine.base_url, anthropic.base_url, workdir)) as start,
    ):
        yield Upstreams(engine, anthropic, await start())
