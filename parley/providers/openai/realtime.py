"""A realtime session's upstream WebSocket: OpenAI's ``/v1/realtime`` or Azure's.

OpenAI (``type: openai``): ``{base_url}/realtime?model=<upstream model>`` with the
channel's key as ``Authorization: Bearer``. Azure OpenAI (``type: azure-openai``): with
``azure.api_version``, ``{base_url}/openai/realtime?api-version=…&deployment=<upstream
model>``; without, the v1 path ``{base_url}/openai/v1/realtime?model=<deployment>``; the
key in ``api-key`` (or as a Bearer Entra token with ``azure.auth: bearer``). The scheme
becomes ``ws``/``wss``. The socket is aiohttp's client WebSocket, in a session of its
own (one connection for the session's life), with the same bound on a frame as the
caller's side; a refused handshake is mapped to the error tree here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from yarl import URL

from parley.catalog_settings import AzureSettings
from parley.errors import UpstreamError, UpstreamRefused, UpstreamUnreachable
from parley.providers.base import Target
from parley.providers.redaction import redact

REALTIME_TYPES = frozenset({"openai", "azure-openai"})
"""The channel types whose upstreams serve realtime sessions."""
WS_SCHEMES = {"https": "wss", "http": "ws"}


def realtime_address(target: Target) -> tuple[URL, dict[str, str]]:
    """The upstream's WebSocket URL for ``target`` and the headers that authenticate it."""
    key = target.api_key
    if target.type_name == "azure-openai":
        options = target.options if isinstance(target.options, AzureSettings) else AzureSettings()
        if options.api_version is None:
            url = URL(f"{target.base_url}/openai/v1/realtime").with_query(model=target.model)
        else:
            url = URL(f"{target.base_url}/openai/realtime").with_query(
                {"api-version": options.api_version, "deployment": target.model}
            )
        headers = {}
        if key:
            bearer = options.auth == "bearer"
            headers = {"Authorization": f"Bearer {key}"} if bearer else {"api-key": key}
    else:
        url = URL(f"{target.base_url}/realtime").with_query(model=target.model)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
    return url.with_scheme(WS_SCHEMES.get(url.scheme, "wss")), headers


@asynccontextmanager
async def realtime_socket(
    target: Target, max_event_bytes: int
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """The upstream's WebSocket, open for the block (raises an ``UpstreamError`` when it
    cannot be opened); closed on leaving."""
    session = aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=target.connect_timeout),
        auto_decompress=False,
    )
    try:
        socket = await _connect(session, target, max_event_bytes)
        try:
            yield socket
        finally:
            await socket.close()
    finally:
        await session.close()


async def _connect(
    session: aiohttp.ClientSession, target: Target, max_event_bytes: int
) -> aiohttp.ClientWebSocketResponse:
    url, headers = realtime_address(target)
    try:
        async with asyncio.timeout(target.connect_timeout + target.read_timeout):
            return await session.ws_connect(
                url,
                headers=headers,
                max_msg_size=max_event_bytes,
                autoping=True,
                heartbeat=None,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=target.connect_timeout),
            )
    except TimeoutError:
        raise UpstreamUnreachable(
            f"The upstream channel `{target.channel}` did not open a realtime session in time."
        ) from None
    except aiohttp.WSServerHandshakeError as error:
        raise _refused(target, error.status, error.message) from None
    except (aiohttp.ClientError, OSError):
        raise UpstreamUnreachable(
            f"The upstream channel `{target.channel}` is unreachable."
        ) from None


def _refused(target: Target, status: int, said: str) -> UpstreamError:
    """A refused handshake: the channel's failure (the caller sees a 502 naming only the
    channel; the operator's log and a channel test see the upstream's words, redacted)."""
    if status < 300:
        return UpstreamError(f"The upstream channel `{target.channel}` sent a broken reply.")
    return UpstreamRefused(
        f"The upstream channel `{target.channel}` refused the realtime session (HTTP {status}).",
        upstream_status=status,
        retryable=status >= 500 or status in (401, 403, 408, 429),
        detail=redact(said[:500], target.api_key) if said else None,
    )
