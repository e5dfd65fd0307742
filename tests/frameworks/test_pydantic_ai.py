"""pydantic-ai, unmodified, with its ``openai:`` model (the Responses API) pointed at
Parley by the environment, and an ``OpenAIResponsesModel`` built by hand: a plain run,
a tool, structured output and a stream, over an OpenAI-compatible and an Anthropic
channel."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.api.responses_harness import Upstreams

FAMILIES = pytest.mark.parametrize("family", ["gpt", "claude"])


@pytest.fixture
def parley_env(upstreams: Upstreams, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", upstreams.gateway.v1)
    monkeypatch.setenv("OPENAI_API_KEY", key)


@FAMILIES
@pytest.mark.usefixtures("parley_env")
async def test_an_openai_model_by_name_runs(upstreams: Upstreams, family: str) -> None:
    agent = Agent(f"openai:{family}-like", instructions="Be brief.")
    result = await agent.run("hello from pydantic")
    assert result.output == "echo: hello from pydantic"
    usage = result.usage
    assert usage.input_tokens > 0 and usage.output_tokens == 4


@FAMILIES
async def test_a_tool_is_called_through_the_responses_model(
    upstreams: Upstreams, key: str, family: str
) -> None:
    provider = OpenAIProvider(base_url=upstreams.gateway.v1, api_key=key)
    agent = Agent(OpenAIResponsesModel(f"{family}-tools", provider=provider))
    seen: list[str] = []

    @agent.tool_plain
    def lookup(query: str) -> str:
        """Look the query up."""
        seen.append(query)
        return "found it"

    result = await agent.run("look for parley")
    assert seen == ["echo: look for parley"]
    assert isinstance(result.output, str) and result.output.startswith("echo:")


class City(BaseModel):
    name: str
    country: str


@FAMILIES
@pytest.mark.usefixtures("parley_env")
async def test_structured_output_by_its_default_tool(family: str) -> None:
    # pydantic-ai's default structured output is a tool call ("final_result") whose
    # arguments are the object: the fakes call the first tool with {"query": ...}
    class Query(BaseModel):
        query: str

    agent = Agent(f"openai:{family}-tools", output_type=Query)
    result = await agent.run("Paris")
    assert result.output == Query(query="echo: Paris")


@pytest.mark.usefixtures("parley_env")
async def test_native_structured_output_on_a_chat_channel() -> None:
    from pydantic_ai import NativeOutput

    agent = Agent("openai:gpt-like", output_type=NativeOutput(City))
    result = await agent.run('{"name": "Paris", "country": "France"}')
    assert result.output == City(name="Paris", country="France")


@FAMILIES
@pytest.mark.usefixtures("parley_env")
async def test_a_streamed_run(family: str) -> None:
    agent = Agent(f"openai:{family}-like")
    async with agent.run_stream("stream this answer") as run:
        pieces = [text async for text in run.stream_text(delta=True, debounce_by=None)]
    assert "".join(pieces) == "echo: stream this answer"
    assert len(pieces) > 1
