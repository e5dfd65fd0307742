"""Each Vertex AI channel's project, region and access tokens, made from its settings.

A channel's settings reach the adapter with every call (``Target.options``), so channels
added while Parley runs are served like configured ones: ``VertexChannels`` makes a
channel's token source the first time a call names it, and again when its settings
change. The configured channels' are made at start-up (``prepare``), their keys loaded
and their first tokens minting, so a bad key stops the start and the first call finds a
token ready.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from parley.catalog_settings import ChannelSettings, VertexOptions
from parley.errors import UpstreamError
from parley.http import HttpClient
from parley.providers.base import Target
from parley.providers.vertex.account import Signer
from parley.providers.vertex.tokens import AccessTokens
from parley.service_account import AccountError, read_account
from parley.settings import ConfigError


@dataclass(frozen=True, slots=True)
class VertexChannel:
    """Where one channel's project lives, and its tokens."""

    project: str
    region: str
    tokens: AccessTokens


class VertexChannels:
    """Channel name and settings → its ``VertexChannel``."""

    __slots__ = ("_found", "_http")

    def __init__(self, http: HttpClient) -> None:
        self._http = http
        self._found: dict[tuple[str, VertexOptions], VertexChannel] = {}

    def prepare(self, channels: Sequence[ChannelSettings]) -> None:
        """Make the configured channels' token sources; a key that cannot be loaded is a
        ``ConfigError`` naming the channel. Inside the event loop (``Services.start``)
        each first token starts minting at once."""
        try:
            running = asyncio.get_running_loop() is not None
        except RuntimeError:
            running = False  # built to list the types (``parley serve``'s checks)
        for index, channel in enumerate(channels):
            options = channel.vertex
            if channel.type != "vertex" or options is None:
                continue
            try:
                found = self._make(channel.name, options)
            except AccountError as error:
                raise ConfigError(f"channels[{index}].vertex.credentials_file: {error}") from None
            if running:
                found.tokens.prefetch()

    def of(self, target: Target) -> VertexChannel:
        """The target's channel; an ``UpstreamError`` naming it if it cannot be served."""
        options = target.options
        if not isinstance(options, VertexOptions):
            raise UpstreamError(f"The channel `{target.channel}` has no Vertex AI settings.")
        found = self._found.get((target.channel, options))
        if found is not None:
            return found
        try:
            return self._make(target.channel, options)
        except AccountError:
            raise UpstreamError(
                f"The channel `{target.channel}`'s service account cannot be used."
            ) from None

    def _make(self, name: str, options: VertexOptions) -> VertexChannel:
        signer = Signer(read_account(options.credentials_file))
        found = VertexChannel(
            options.project, options.region, AccessTokens(name, signer, self._http)
        )
        self._found[(name, options)] = found
        return found
