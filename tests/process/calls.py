"""Calls to running gateways over real HTTP, and the config they are started with.

``burst`` fires many chat calls at once (aiohttp, a fresh event loop) from a synchronous
test and returns every reply, in order; each call is bounded by ``CALL_SECONDS``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

MODEL = "chat-large"
CALL_SECONDS = 10.0


def gateway_config(
    engine_url: str, workdir: Path, *, database_url: str | None = None, **sections: Any
) -> dict[str, Any]:
    """One channel to the fake engine serving ``chat-large``; ``sections`` are merged in."""
    config: dict[str, Any] = {
        "server": {"shutdown_grace_seconds": 5},
        "database": {"url": database_url or f"sqlite:///{workdir / 'parley.db'}"},
        "limits": {"cache_refresh_seconds": 0.2},
        "usage": {"flush_seconds": 0.1, "spill_dir": str(workdir)},
        "channels": [
            {
                "name": "engine",
                "base_url": engine_url,
                "models": [{"name": MODEL, "upstream": "upstream-chat"}],
                "timeouts": {"connect": 2, "read": 5},
            }
        ],
        "models": [
            {
                "name": MODEL,
                "kind": "chat",
                "prices": {"input_per_1k": "0.001", "output_per_1k": "0.002"},
            }
        ],
    }
    for section, values in sections.items():
        if isinstance(values, dict) and isinstance(config.get(section), dict):
            config[section] = {**config[section], **values}
        else:
            config[section] = values
    return config


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass(frozen=True)
class Chat:
    """One chat call: which gateway, which key, streamed or not."""

    v1: str
    key: str
    stream: bool = False
    text: str = "hello there"
    model: str = MODEL
    max_tokens: int | None = None


async def send(session: aiohttp.ClientSession, chat: Chat) -> Reply:
    body: dict[str, Any] = {
        "model": chat.model,
        "messages": [{"role": "user", "content": chat.text}],
        "stream": chat.stream,
    }
    if chat.max_tokens is not None:
        body["max_tokens"] = chat.max_tokens
    async with session.post(
        f"{chat.v1}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {chat.key}"},
        timeout=aiohttp.ClientTimeout(total=CALL_SECONDS),
    ) as response:
        return Reply(
            response.status,
            {k.lower(): v for k, v in response.headers.items()},
            await response.read(),
        )


def burst(chats: Sequence[Chat], concurrency: int = 10) -> list[Reply]:
    """Send every call, at most ``concurrency`` at a time; the replies, in order."""

    async def run() -> list[Reply]:
        gate = asyncio.Semaphore(concurrency)
        async with aiohttp.ClientSession() as session:

            async def one(chat: Chat) -> Reply:
                async with gate:
                    return await send(session, chat)

            return list(await asyncio.gather(*(one(chat) for chat in chats)))

    return asyncio.run(run())


def call(chat: Chat) -> Reply:
    """One call on a fresh connection."""
    return burst([chat])[0]


def get(url: str, key: str) -> Reply:
    async def run() -> Reply:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                url,
                headers={"Authorization": f"Bearer {key}"},
                timeout=aiohttp.ClientTimeout(total=CALL_SECONDS),
            ) as response,
        ):
            headers = {k.lower(): v for k, v in response.headers.items()}
            return Reply(response.status, headers, await response.read())

    return asyncio.run(run())
