"""Building JSON replies with the headers every reply carries."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from aiohttp import web


def json_reply(
    payload: Any, headers: Mapping[str, str] | None = None, status: int = 200
) -> web.Response:
    return web.Response(
        status=status,
        body=orjson.dumps(payload),
        content_type="application/json",
        headers=dict(headers or {}),
    )
