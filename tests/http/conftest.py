"""The upstream client's suites run on both event loops Parley may serve on."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
import uvloop


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> Mapping[str, Any]:
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
