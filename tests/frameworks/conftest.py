"""Real agent frameworks, unmodified and with their defaults, against a live Parley in
front of the OpenAI-compatible fake engine and the Anthropic fake (``Upstreams``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api.responses_harness import Upstreams, responses_gateway


@pytest.fixture
async def upstreams(tmp_path: Path) -> AsyncIterator[Upstreams]:
    async for running in responses_gateway(tmp_path):
        yield running


@pytest.fixture
async def key(upstreams: Upstreams) -> str:
    gateway = upstreams.gateway
    return await gateway.key(await gateway.group("agents"))
