"""The OpenAI Agents SDK (``openai-agents``), unmodified, with its default model (the
Responses API) pointed at Parley: a tool call, a handoff, and a streamed run, over an
OpenAI-compatible channel and an Anthropic one. Tracing is off (it would call OpenAI)."""

from __future__ import annotations

import os

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

import openai
import pytest
from agents import (
    Agent,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)

from tests.api.responses_harness import Upstreams

FAMILIES = pytest.mark.parametrize("family", ["gpt", "claude"])
asked: list[str] = []


@function_tool
def get_weather(query: str) -> str:
    """The weather for a query naming a city."""
    asked.append(query)
    return "sunny and 21 degrees"


def use_parley(upstreams: Upstreams, key: str) -> None:
    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=upstreams.gateway.v1, api_key=key, max_retries=0)
    upstreams.gateway.clients.append(client)
    set_default_openai_client(client, use_for_tracing=False)


@FAMILIES
async def test_an_agent_calls_a_tool_and_answers(
    upstreams: Upstreams, key: str, family: str
) -> None:
    use_parley(upstreams, key)
    asked.clear()
    agent = Agent(
        name="Weather", instructions="Use the tool.", model=f"{family}-tools", tools=[get_weather]
    )
    result = await Runner.run(agent, "weather in Paris")
    assert asked == ["echo: weather in Paris"]
    assert result.final_output.startswith("echo:")
    kinds = [item.type for item in result.new_items]
    # the fake engine says its echo beside the call (a message item first); Anthropic's not
    assert kinds[-3:] == ["tool_call_item", "tool_call_output_item", "message_output_item"]


@FAMILIES
async def test_an_agent_hands_off_to_another(upstreams: Upstreams, key: str, family: str) -> None:
    use_parley(upstreams, key)
    specialist = Agent(name="Specialist", instructions="Answer.", model=f"{family}-like")
    triage = Agent(
        name="Triage",
        instructions="Hand off to the specialist.",
        model=f"{family}-tools",
        handoffs=[specialist],
    )
    result = await Runner.run(triage, "please help me")
    assert result.last_agent is specialist
    assert result.final_output.startswith("echo:")
    assert "handoff_output_item" in [item.type for item in result.new_items]


@FAMILIES
async def test_a_streamed_run_with_a_tool(upstreams: Upstreams, key: str, family: str) -> None:
    use_parley(upstreams, key)
    asked.clear()
    agent = Agent(
        name="Weather", instructions="Use the tool.", model=f"{family}-tools", tools=[get_weather]
    )
    result = Runner.run_streamed(agent, "weather in Oslo")
    deltas: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas.append(event.data.delta)
    assert asked == ["echo: weather in Oslo"]
    assert "".join(deltas).endswith(result.final_output)  # the last turn's text, streamed
    assert result.final_output.startswith("echo:")
