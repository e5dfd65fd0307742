"""The Vercel AI SDK (npm ``ai`` and ``@ai-sdk/openai``), unmodified, run by Node against
Parley: ``openai(model)`` (the Responses API) with generateText, streamText, a tool and
a reasoning model's ``reasoningText`` (read from reasoning summaries only), over an
OpenAI-compatible and an Anthropic channel.

The packages are pinned by ``tests/frameworks/js/package-lock.json``; the first run
installs them (``npm ci``) when ``node_modules`` is missing. Without Node the tests are
skipped, naming why.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.api.responses_harness import Upstreams
from tests.upstreams.anthropic import THOUGHT as CLAUDE_THOUGHT
from tests.upstreams.completion_script import THOUGHT as ENGINE_THOUGHT

HERE = Path(__file__).parent / "js"
FAMILIES = pytest.mark.parametrize("family", ["gpt", "claude"])
THOUGHTS = {"gpt": "".join(ENGINE_THOUGHT), "claude": "".join(CLAUDE_THOUGHT)}


@pytest.fixture(scope="session")
def node() -> str:
    found = shutil.which("node")
    npm = shutil.which("npm")
    if found is None or npm is None:
        pytest.skip("Node.js and npm are needed for the Vercel AI SDK tests")
    if not (HERE / "node_modules" / "@ai-sdk" / "openai").is_dir():
        import subprocess

        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, timeout=600)
    return found


async def run_script(node: str, upstreams: Upstreams, key: str, family: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "PARLEY_BASE_URL": upstreams.gateway.v1,
        "PARLEY_KEY": key,
        "PARLEY_MODEL": f"{family}-like",
        "PARLEY_TOOL_MODEL": f"{family}-tools",
        "PARLEY_REASONING_MODEL": "gpt-reasoning" if family == "gpt" else "claude-thinking",
    }
    process = await asyncio.create_subprocess_exec(
        node,
        "run.mjs",
        cwd=HERE,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()[-3000:]
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


@FAMILIES
async def test_generate_stream_and_tools(
    node: str, upstreams: Upstreams, key: str, family: str
) -> None:
    found = await run_script(node, upstreams, key, family)
    whole = found["whole"]
    assert whole["text"] == "echo: hello from vercel"
    assert whole["finishReason"] == "stop"
    assert whole["usage"]["outputTokens"] == 4 and whole["usage"]["inputTokens"] > 0
    streamed = found["streamed"]
    assert streamed["text"] == "echo: stream from vercel"
    assert len(streamed["pieces"]) > 1
    assert streamed["usage"]["outputTokens"] == 4
    tool = found["tool"]
    assert tool["asked"] == ["echo: weather in Rome"]
    assert tool["steps"] == 2 and tool["text"].startswith("echo:")
    thought = THOUGHTS[family]
    assert found["reasoning"] == {"whole": thought, "streamed": thought}
    paths = [r.path for r in (upstreams.engine.requests if family == "gpt" else [])]
    assert all(path.endswith("/chat/completions") for path in paths)
