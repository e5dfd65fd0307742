"""Each Vertex AI channel's project, region and access tokens, built from the settings."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from parley.catalog_settings import ChannelSettings
from parley.http import HttpClient
from parley.providers.vertex.account import AccountError, Signer, read_account
from parley.providers.vertex.adapter import VertexChannel
from parley.providers.vertex.tokens import AccessTokens
from parley.settings import ConfigError


def vertex_channels(
    channels: Sequence[ChannelSettings], http: HttpClient
) -> dict[str, VertexChannel]:
    """Each ``type: vertex`` channel's project, region and tokens, by channel name. Loads
    the service accounts' keys (and so ``cryptography``) only when there is one; a key
    that cannot be loaded is a ``ConfigError`` naming the channel. Inside the event loop
    (``Services.start``) each channel's first token starts minting at once."""
    found: dict[str, VertexChannel] = {}
    try:
        running = asyncio.get_running_loop() is not None
    except RuntimeError:
        running = False  # built to list the types (``parley serve``'s checks): no tokens
    for index, channel in enumerate(channels):
        options = channel.vertex
        if channel.type != "vertex" or options is None:
            continue
        try:
            signer = Signer(read_account(options.credentials_file))
        except AccountError as error:
            raise ConfigError(f"channels[{index}].vertex.credentials_file: {error}") from None
        tokens = AccessTokens(channel.name, signer, http)
        if running:
            tokens.prefetch()
        found[channel.name] = VertexChannel(options.project, options.region, tokens)
    return found
