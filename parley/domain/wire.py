"""The one name for a JSON object as Parley reads and writes it (with ``orjson``): the
bodies of requests, replies, chunks and events, before or instead of a typed record."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]
