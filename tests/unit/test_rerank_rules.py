"""A rerank's rules without a server: how documents become text, what a call may cost at
most and is billed, and which engine rankings are refused."""

from __future__ import annotations

from typing import Any

import pytest

from parley.api.rerank import RERANK_V1, RerankJob, parse_rerank
from parley.domain.pricing import Price
from parley.domain.usage import Usage
from parley.errors import UpstreamError
from parley.pipeline.admit import worst_cost
from parley.providers.base import RankedDocument, RerankReply
from parley.providers.rankings import ranking, reported_count
from parley.providers.registry import ProviderRegistry

BODY = {"model": "m", "query": "two words", "documents": ["a b c d", {"text": "e f g h"}]}


def job(body: dict[str, Any] = BODY, size: int = 100) -> RerankJob:
    return RerankJob(RERANK_V1, parse_rerank(body), ProviderRegistry(), size)


def test_documents_become_their_text_and_top_n_past_the_documents_means_all() -> None:
    parsed = parse_rerank({**BODY, "top_n": 5})
    assert parsed.request.documents == ("a b c d", "e f g h")
    assert parsed.request.top_n is None
    assert parse_rerank({**BODY, "top_n": 1}).request.top_n == 1
    fields = parse_rerank({**BODY, "documents": [{"t": "x", "n": 2}], "rank_fields": ["n", "t"]})
    assert fields.request.documents == ("n: 2\nt: x",)


def test_the_worst_case_holds_every_pair_and_each_hundred_documents() -> None:
    documents = ["word"] * 101
    rerank = job({**BODY, "documents": documents}, size=1_000)
    allowance = rerank.allowance(None)  # type: ignore[arg-type]
    assert allowance.search_units == 2
    # the body, the query once per pair and each pair's framing, and a template
    assert allowance.prompt_tokens == 1_000 + 101 * (len("two words") + 16) + 1_024
    price = Price(input_per_1k=1_000, per_search_unit=5)
    assert worst_cost(price, allowance) == allowance.prompt_tokens + 10


def test_billing_takes_the_engines_counts_else_parleys() -> None:
    rerank = job()
    estimate = 2 * (3 + 2)  # per pair: the query (9 chars) and a document (7 chars)
    results = (RankedDocument(0, 0.5),)
    assert rerank.usage(RerankReply(results)) == Usage(
        prompt_tokens=estimate, estimated=True, search_units=1
    )
    reported = rerank.usage(RerankReply(results, input_tokens=12))
    assert (reported.prompt_tokens, reported.estimated, reported.search_units) == (12, False, 1)
    # an engine's search units above Parley's count are not believed
    over = rerank.allowance(None).cap(  # type: ignore[arg-type]
        rerank.usage(RerankReply(results, input_tokens=12, search_units=9))
    )
    assert (over.search_units, over.estimated) == (1, True)


@pytest.mark.parametrize(
    "results",
    [
        {"index": 0},
        [{"index": 2, "relevance_score": 0.1}],
        [{"index": -1, "relevance_score": 0.1}],
        [{"index": 0, "relevance_score": 0.1}, {"index": 0, "relevance_score": 0.2}],
        [{"index": 0, "relevance_score": float("nan")}],
        [{"index": 0, "relevance_score": True}],
        [{"index": 1.0, "relevance_score": 0.3}],
        ["0"],
    ],
)
def test_a_ranking_parley_cannot_trust_is_refused(results: Any) -> None:
    with pytest.raises(UpstreamError, match="could not be read"):
        ranking("ch", results, 2, "relevance_score")


def test_a_ranking_is_read_best_first() -> None:
    results = [{"index": 0, "score": 0.2}, {"index": 1, "score": 3}]
    assert ranking("ch", results, 2, "score") == (RankedDocument(1, 3.0), RankedDocument(0, 0.2))


def test_reported_counts_are_validated() -> None:
    assert reported_count(2.0, "ch") == 2  # Cohere's SDK types search units as floats
    assert reported_count(2.5, "ch") is None
    assert reported_count(-1, "ch") is None
    assert reported_count(None, "ch") is None
