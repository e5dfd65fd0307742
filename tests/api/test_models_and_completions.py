"""GET /v1/models, /v1/models/{id}, /v1/capabilities, and POST /v1/completions."""

from __future__ import annotations

import openai
import pytest

from parley.api.chat import CHAT
from parley.api.completions import COMPLETIONS
from parley.api.embeddings import EMBEDDINGS
from parley.api.messages import MESSAGES
from parley.api.responses import RESPONSES
from parley.api.speech import SPEECH
from parley.api.transcriptions import OPERATIONS as TRANSCRIPTION
from parley.pipeline.job import Operation
from tests.api.harness import Gateway
from tests.upstreams.openai_compatible import FakeEngine


async def test_models_lists_served_models_the_group_may_use_without_aliases(
    gateway: Gateway, key: str
) -> None:
    page = await gateway.client(key).models.list()
    ids = [model.id for model in page.data]
    assert ids == ["chat-large", "vision-small"]  # `unserved` has no channel; aliases hidden
    chat = page.data[0]
    assert chat.object == "model" and chat.owned_by == "parley" and chat.created > 0
    extra = chat.model_extra or {}
    assert extra["kind"] == "chat" and extra["context_window"] == 32768
    assert extra["capabilities"] == ["LLM_CHAT"]
    assert extra["pricing"]["input_per_1k_tokens"] == pytest.approx(0.00001)


OPERATIONS: list[Operation] = [
    CHAT,
    COMPLETIONS,
    EMBEDDINGS,
    MESSAGES,
    RESPONSES,
    SPEECH,
    *TRANSCRIPTION.values(),
]


async def test_each_model_lists_every_endpoint_that_serves_its_kind(
    gateway: Gateway, key: str
) -> None:
    """A chat model answers on chat, completions, Responses and Messages: its record says
    so, as every other kind's says what serves it."""
    listed = await gateway.client(key).get("/models", cast_to=dict)
    assert listed["data"]
    for record in listed["data"]:
        serving = {op.path for op in OPERATIONS if record["kind"] in op.kinds}
        assert set(record["endpoints"]) == serving, record["id"]
    chat = next(record for record in listed["data"] if record["kind"] == "chat")
    assert "/v1/responses" in chat["endpoints"] and "/v1/messages" in chat["endpoints"]


async def test_a_narrow_group_sees_only_its_models_and_capabilities(gateway: Gateway) -> None:
    key = await gateway.key(await gateway.group("narrow", models=["vision-small"]))
    client = gateway.client(key)
    assert [m.id for m in (await client.models.list()).data] == ["vision-small"]
    capabilities = await client.get("/capabilities", cast_to=dict)
    assert capabilities["capabilities"] == {"LLM_VISION": "vision-small"}
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("chat-large")


async def test_capabilities_map_llm_chat_to_the_default_chat_model(
    gateway: Gateway, key: str
) -> None:
    capabilities = await gateway.client(key).get("/capabilities", cast_to=dict)
    assert capabilities["capabilities"]["LLM_CHAT"] == "chat-large"
    assert {"object": "capability", "key": "LLM_CHAT", "model": "chat-large", "kind": "chat"} in (
        capabilities["data"]
    )


async def test_retrieve_model_by_name_or_alias(gateway: Gateway, key: str) -> None:
    client = gateway.client(key)
    assert (await client.models.retrieve("chat-large")).id == "chat-large"
    assert (await client.models.retrieve("chat")).id == "chat-large"


async def test_plain_completion(gateway: Gateway, key: str, engine: FakeEngine) -> None:
    reply = await gateway.client(key).completions.create(
        model="chat-large", prompt="say something nice", max_tokens=2
    )
    assert reply.id.startswith("cmpl-")
    assert reply.object == "text_completion"
    assert reply.model == "chat-large"
    assert reply.choices[0].text == "echo: say"
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 2
    assert engine.last_request.path == "/v1/completions"
    assert engine.last_request.body["model"] == "upstream-chat"


async def test_streamed_completion_with_usage(gateway: Gateway, key: str) -> None:
    stream = await gateway.client(key).completions.create(
        model="chat-large",
        prompt="one two",
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "echo: one two"
    assert all(c.id.startswith("cmpl-") and c.model == "chat-large" for c in chunks)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 3


@pytest.mark.parametrize("prompt", [None, 5, [], [1, "a"]])
async def test_completion_prompt_is_validated(gateway: Gateway, key: str, prompt: object) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await gateway.client(key).completions.create(model="chat-large", prompt=prompt)  # type: ignore[arg-type]
    assert refused.value.param == "prompt"


async def test_completion_accepts_token_arrays(gateway: Gateway, key: str) -> None:
    reply = await gateway.client(key).completions.create(model="chat-large", prompt=[[1, 2, 3]])
    assert reply.choices
