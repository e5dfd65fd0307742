"""Vertex AI access tokens: minted once for many calls, refreshed in the background
before they expire (the call keeps the old token meanwhile), waited for only when none is
usable; against the fake token endpoint, which verifies each JWT's signature."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from parley.catalog_settings import VertexOptions
from parley.errors import UpstreamError
from parley.http import HttpClient
from parley.providers.base import Target
from parley.providers.vertex.account import Signer
from parley.providers.vertex.channels import VertexChannels
from parley.providers.vertex.tokens import AccessTokens
from parley.service_account import read_account
from tests.api.test_vertex_channel import EMAIL, make_key, service_account
from tests.upstreams.vertex import FakeVertex


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    client = HttpClient()
    yield client
    await client.close()


async def test_tokens_are_minted_once_and_refreshed_ahead(http: HttpClient, tmp_path: Path) -> None:
    key = make_key()
    async with FakeVertex(key.public_key(), EMAIL, lifetime=3600) as vertex:
        account = read_account(str(service_account(key, vertex.token_uri, tmp_path / "sa.json")))
        assert "PRIVATE" not in repr(account)
        clock = Clock()
        tokens = AccessTokens("gcp", Signer(account), http, clock)
        first = await asyncio.gather(*(tokens.token() for _ in range(20)))
        assert len(set(first)) == 1 and vertex.mints == 1
        clock.now += 3000  # still before the refresh point (300 s before expiry)
        assert await tokens.token() == first[0] and vertex.mints == 1
        clock.now += 400  # past the refresh point, before expiry
        assert await tokens.token() == first[0]  # served at once, the next one minting
        for _ in range(50):
            if vertex.mints == 2:
                break
            await asyncio.sleep(0.01)
        renewed = await tokens.token()
        assert vertex.mints == 2 and renewed != first[0] and renewed in vertex.tokens
        clock.now += 4000  # expired: the call waits for a fresh one
        latest = await asyncio.gather(tokens.token(), tokens.token())
        assert latest[0] == latest[1] != renewed and vertex.mints == 3


async def test_a_refused_mint_is_an_error_naming_the_channel(
    http: HttpClient, tmp_path: Path
) -> None:
    key = make_key()
    async with FakeVertex(make_key().public_key(), EMAIL) as vertex:
        account = read_account(str(service_account(key, vertex.token_uri, tmp_path / "sa.json")))
        tokens = AccessTokens("gcp", Signer(account), http, Clock())
        with pytest.raises(Exception) as failed:
            await tokens.token()
        assert "`gcp`" in str(failed.value) and "status 400" in str(failed.value)
        assert vertex.mints == 0


def test_a_channel_added_live_gets_its_tokens_at_its_first_call(
    http: HttpClient, tmp_path: Path
) -> None:
    key = make_key()
    first = service_account(key, "https://oauth2.example/token", tmp_path / "a.json")
    second = service_account(key, "https://oauth2.example/token", tmp_path / "b.json")

    def target(path: Path | None) -> Target:
        options = None
        if path is not None:
            options = VertexOptions(
                project="parley-test", region="us-east5", credentials_file=str(path)
            )
        return Target("live", "https://x.example/v1", None, "gemini", 1, 1, options=options)

    channels = VertexChannels(http)
    found = channels.of(target(first))
    assert channels.of(target(first)) is found and found.project == "parley-test"
    assert channels.of(target(second)) is not found  # its settings changed: new tokens
    with pytest.raises(UpstreamError, match="`live` has no Vertex AI settings"):
        channels.of(target(None))
