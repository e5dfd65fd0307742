"""A Codex-shaped Responses call relayed and translated: dozens of function tools,
reasoning (with encrypted content from an earlier turn), earlier calls and their
outputs in the input, ``store: false``, ``include``, a prompt cache key, streamed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import orjson

from tests.api.responses_harness import responses_gateway

TOOLS = [
    {
        "type": "function",
        "name": f"tool_{n}",
        "description": f"Tool number {n}.",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["query"],
            "additionalProperties": False,
        },
    }
    for n in range(40)
]
CODEX_BODY: dict[str, Any] = {
    "model": "gpt-codex",
    "instructions": "You are a coding agent running in a terminal. " * 40,
    "input": [
        {"type": "message", "role": "developer",
         "content": [{"type": "input_text", "text": "<permissions>workspace-write</permissions>"}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "<environment_context>cwd=/repo"}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "list the files"}]},
        {"type": "reasoning", "id": "rs_earlier", "summary": [
            {"type": "summary_text", "text": "I should list files."}],
         "encrypted_content": "gAAAAB-opaque-earlier-reasoning"},
        {"type": "function_call", "id": "fc_earlier", "call_id": "call_ls", "name": "tool_0",
         "arguments": "{\"query\": \"ls\"}"},
        {"type": "function_call_output", "call_id": "call_ls", "output": "README.md\nsrc"},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "now read the readme"}]},
    ],
    "tools": TOOLS,
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "019a-session",
}  # fmt: skip


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    found = []
    for block in raw.split(b"\n\n"):
        if block.strip():
            name, data = block.split(b"\n", 1)
            payload = orjson.loads(data.removeprefix(b"data: "))
            assert name == b"event: " + payload["type"].encode()
            found.append(payload)
    return found


async def test_a_codex_shaped_stream_is_translated(tmp_path: Path) -> None:
    async for upstreams in responses_gateway(tmp_path):
        gateway = upstreams.gateway
        key = await gateway.key(await gateway.group("codex"))
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{gateway.v1}/responses",
                json=CODEX_BODY,
                headers={"Authorization": f"Bearer {key}"},
            ) as reply,
        ):
            assert reply.status == 200, await reply.text()
            assert reply.headers["content-type"].startswith("text/event-stream")
            events = sse_events(await reply.read())

        sent = upstreams.engine.last_request.body
        assert len(sent["tools"]) == 40 and sent["tools"][39]["function"]["name"] == "tool_39"
        assert sent["parallel_tool_calls"] is False
        assert sent["reasoning_effort"] == "medium"
        assert sent["stream_options"] == {"include_usage": True}
        roles = [message["role"] for message in sent["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "user"]
        assert sent["messages"][0]["content"].startswith("You are a coding agent")
        assert "<permissions>" in sent["messages"][0]["content"]
        assert sent["messages"][2]["tool_calls"][0]["id"] == "call_ls"
        assert sent["messages"][3] == {
            "role": "tool", "tool_call_id": "call_ls", "content": "README.md\nsrc"
        }  # fmt: skip

        numbers = [event["sequence_number"] for event in events]
        assert numbers == list(range(len(events)))
        kinds = [event["type"] for event in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed"
        final = events[-1]["response"]
        assert [item["type"] for item in final["output"]] == [
            "reasoning",
            "message",
            "function_call",
        ]
        assert final["output"][2]["name"] == "tool_0"
        assert final["store"] is False and final["model"] == "gpt-codex"
        assert final["usage"]["output_tokens_details"]["reasoning_tokens"] == 5
        assert len(final["tools"]) == 40
