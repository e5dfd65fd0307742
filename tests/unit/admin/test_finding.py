"""Search, sort and pages over a list (``admin/finding.py``), and how the dashboard
writes money (``usd``) and ranks categories (``ranking_chart``)."""

from __future__ import annotations

import pytest
from multidict import MultiDict

from parley.admin.finding import Finder, Listing, listing_from_params
from parley.admin.ui.charts import Bar, ranking_chart
from parley.admin.ui.render import usd
from parley.errors import InvalidRequest

WORDS = Finder(
    lambda word: (word,),
    {"word": lambda word: word, "length": lambda word: len(word) if word != "zz" else None},
)
ITEMS = ["beta", "Alpha", "gamma", "zz", "alphabet"]


def test_a_search_matches_any_case_and_pages_count_every_match() -> None:
    page = WORDS.find(ITEMS, Listing(q="ALPHA", sort="word", limit=1))
    assert page.items == ["Alpha"] and page.total == 2 and page.next_offset == 1
    last = WORDS.find(ITEMS, Listing(q="alpha", sort="word", limit=1, offset=1))
    assert last.items == ["alphabet"] and last.next_offset is None
    assert last.previous_offset == 0
    assert last.meta() == {
        "total": 2,
        "offset": 1,
        "limit": 1,
        "next_offset": None,
        "has_more": False,
    }


def test_sorting_ignores_case_and_puts_missing_values_last_either_way() -> None:
    assert WORDS.find(ITEMS, Listing(sort="word")).items == ITEMS_SORTED
    assert WORDS.find(ITEMS, Listing(sort="length")).items[-1] == "zz"
    assert WORDS.find(ITEMS, Listing(sort="length", descending=True)).items[-1] == "zz"
    assert WORDS.find(ITEMS, Listing(sort="length", descending=True)).items[0] == "alphabet"


ITEMS_SORTED = ["Alpha", "alphabet", "beta", "gamma", "zz"]


@pytest.mark.parametrize(
    ("query", "param"),
    [("sort=nope", "sort"), ("limit=0", "limit"), ("offset=x", "offset"), ("order=up", "order")],
)
def test_bad_list_parameters_are_400_naming_the_parameter(query: str, param: str) -> None:
    name, _, value = query.partition("=")
    with pytest.raises(InvalidRequest) as refused:
        listing_from_params(MultiDict({name: value}), ["word"])
    assert refused.value.param == param


def test_descending_is_a_minus_or_order_desc() -> None:
    assert listing_from_params(MultiDict({"sort": "-word"}), ["word"]).descending
    assert listing_from_params(MultiDict({"order": "desc"}), ["word"]).descending
    assert listing_from_params(MultiDict(), ["word"]) == Listing(sort="word")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "$0.00"),
        (0.0134, "$0.0134"),
        (0.5, "$0.50"),
        (0.00012, "$0.00012"),
        (1.234, "$1.23"),
        (1234.5, "$1,234.50"),
        (0.0000001, "<\u00a0$0.000001"),
        (None, "—"),
    ],
)
def test_spend_keeps_the_cents_fraction_below_a_dollar(value: float | None, shown: str) -> None:
    assert usd(value) == shown


def test_a_ranking_chart_shortens_names_and_sums_the_tail() -> None:
    long_name = "a-very-long-group-name-for-a-tenant-of-many-words-and-more-words"
    bars = [Bar(long_name, 50.0), *(Bar(f"g{n}", float(n)) for n in range(12))]
    svg = str(ranking_chart(bars, title="Spend by group", limit=4))
    assert svg.startswith('<svg class="chart" viewBox=')
    assert f"<title>{long_name}: 50</title>" in svg and f">{long_name[:38]}…<" in svg
    assert "10 others" in svg and svg.count('<rect class="bar"') == 4
    assert "Nothing in this range." in str(ranking_chart([], title="Empty"))
