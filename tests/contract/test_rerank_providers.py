"""The contract every ``Rerank`` adapter keeps, against a fake of its engine over HTTP:
the same ranking from every dialect, the engine's counts read, its refusals named in the
error tree (a channel's own failure retryable, a refusal of the request relayed with the
engine's message, never the channel's key), and an unreachable engine a 502."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from parley.errors import UpstreamRefused, UpstreamRejected, UpstreamUnreachable
from parley.http import HttpClient
from parley.providers.base import RERANK, RankedDocument, Rerank, RerankRequest, Target
from parley.providers.registry import ProviderRegistry
from parley.runtime.channel_probe import probe
from parley.settings import ChannelModel, ChannelSettings
from tests.upstreams import CONNECT_SECONDS
from tests.upstreams.rerankers import FakeCohere, FakeJina, FakeTEI, ranked

CHANNEL_KEY = "sk-channel-secret-rerank"
QUERY = "capital of france"
DOCUMENTS = ("Berlin is the capital of Germany", "Paris is the capital of France", "Lyon")
WORDS = sum(len(QUERY.split()) + len(text.split()) for text in DOCUMENTS)


@dataclass(frozen=True)
class Case:
    channel_type: str
    fake: Callable[..., Any]
    url: Callable[[Any], str]
    input_tokens: int | None
    search_units: int | None


CASES = [
    Case("cohere", FakeCohere, lambda fake: fake.endpoint, None, 1),
    Case("jina", FakeJina, lambda fake: fake.base_url, WORDS, None),
    Case("vllm", lambda **kw: FakeJina(vllm=True, **kw), lambda fake: fake.base_url, WORDS, None),
    Case("tei", FakeTEI, lambda fake: fake.endpoint, None, None),
]


@pytest.fixture(params=CASES, ids=[case.channel_type for case in CASES])
def case(request: pytest.FixtureRequest) -> Case:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def fake(case: Case) -> AsyncIterator[Any]:
    async with case.fake(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def adapter(case: Case) -> AsyncIterator[Rerank]:
    client = HttpClient()
    yield ProviderRegistry.default(client).serving(RERANK, case.channel_type)
    await client.close()


def target(case: Case, fake: Any, key: str = CHANNEL_KEY) -> Target:
    return Target("main", case.url(fake), key, "upstream-reranker", CONNECT_SECONDS, 5.0)


async def test_every_dialect_ranks_alike(case: Case, fake: Any, adapter: Rerank) -> None:
    reply = await adapter.rerank(target(case, fake), RerankRequest(QUERY, DOCUMENTS))
    expected = tuple(RankedDocument(i, score) for i, score in ranked(QUERY, list(DOCUMENTS)))
    assert reply.results == expected
    assert (reply.input_tokens, reply.search_units) == (case.input_tokens, case.search_units)
    assert fake.last_request.headers["Authorization"] == f"Bearer {CHANNEL_KEY}"


async def test_a_refused_key_is_the_channels_own_failure(
    case: Case, fake: Any, adapter: Rerank
) -> None:
    with pytest.raises(UpstreamRefused) as caught:
        await adapter.rerank(target(case, fake, "sk-wrong"), RerankRequest(QUERY, DOCUMENTS))
    assert caught.value.retryable and caught.value.status == 502
    assert not isinstance(caught.value, UpstreamRejected)


async def test_a_refusal_of_the_request_is_relayed(case: Case, fake: Any, adapter: Rerank) -> None:
    fake.fail = 422
    with pytest.raises(UpstreamRejected) as caught:
        await adapter.rerank(target(case, fake), RerankRequest(QUERY, DOCUMENTS))
    assert caught.value.message == "the engine is unavailable"
    assert CHANNEL_KEY not in str(caught.value)


async def test_an_unreachable_engine_is_a_502(case: Case, adapter: Rerank) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = Target("main", f"http://127.0.0.1:{port}", CHANNEL_KEY, "m", 1.0, 1.0)
    with pytest.raises(UpstreamUnreachable):
        await adapter.rerank(unreachable, RerankRequest(QUERY, DOCUMENTS))


async def test_a_channels_test_button_reranks_one_word(case: Case, fake: Any) -> None:
    client = HttpClient()
    channel = ChannelSettings(
        name="main", type=case.channel_type, base_url=case.url(fake), api_key=CHANNEL_KEY,
        models=(ChannelModel(name="reranker"),),
    )  # fmt: skip
    try:
        registry = ProviderRegistry.default(client)
        result = await probe(registry, channel, channel.models[0], "rerank")
        assert (result.ok, result.status) == (True, 200)
        fake.fail = 503
        result = await probe(registry, channel, channel.models[0], "rerank")
        assert (result.ok, result.status) == (False, 503)
        chat = await probe(registry, channel, channel.models[0], "chat")
        if case.channel_type in ("cohere", "tei", "jina"):  # rerank only
            assert (chat.status, chat.message) == (
                400, f"A {case.channel_type} channel cannot serve chat models.")  # fmt: skip
    finally:
        await client.close()
