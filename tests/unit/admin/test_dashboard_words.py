"""The words and numbers the dashboard shows are the true ones: whose rate limit refused
a call, a budget's state, a failure's reason (redacted), a money axis in dollars with
room for its labels, a path broken only after a '/'."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

import pytest

from parley.admin.ui.charts import CHAR_W, Bar, bar_chart
from parley.admin.ui.pages import axis_usd
from parley.admin.ui.render import path_breaks, setting, to_second
from parley.admin.views import Budget
from parley.domain.groups import Quota
from parley.errors import RateLimited, UpstreamRefused, UpstreamRejected, UpstreamTimeout
from parley.limits.base import Scope
from parley.limits.buckets import buckets_for, decide
from parley.pipeline.admit import _refusal
from parley.pipeline.meter import MAX_DETAIL, failure_detail


def _refused(scopes: tuple[Scope, ...], levels: list[float]) -> RateLimited:
    buckets = buckets_for(scopes, 10)
    decision = decide(buckets, levels, allowed=False, taken=False)
    return _refusal(decision, 10, {})


def test_a_refusal_names_the_limit_that_applied() -> None:
    group, key = Scope("g:1", Quota(rpm=100)), Scope("k:7", Quota(rpm=4))
    by_key = _refused((group, key), [50.0, 0.0])  # the key's bucket is empty
    assert "4 requests per minute for this key" in by_key.message
    by_group = _refused((group, key), [0.0, 3.0])
    assert "100 requests per minute for your group" in by_group.message
    alone = _refused((Scope("g:1", Quota(rpm=2)),), [0.0])
    assert "2 requests per minute for your group" in alone.message
    tokens = Scope("k:7", Quota(tpm=5))
    too_large = _refused((Scope("g:1", Quota(tpm=1000)), tokens), [1000.0, 5.0])
    assert "5 tokens per minute for this key" in too_large.message


@pytest.mark.parametrize(
    ("limit", "spent", "state"),
    [(None, 10, "none"), (100, 10, "ok"), (100, 80, "near"), (100, 100, "over"), (0, 0, "over")],
)
def test_a_budget_says_whether_it_is_over_or_near(
    limit: int | None, spent: int, state: str
) -> None:
    budget = Budget("month", date(2026, 11, 1), date(2026, 12, 1), limit, spent)
    assert budget.state == state and budget.view()["state"] == state
    assert budget.over is (state == "over")


def test_a_failure_reason_is_the_upstreams_redacted_words_or_what_the_caller_was_told() -> None:
    refused = UpstreamRefused(
        "The upstream channel `engine` failed (status 503).",
        upstream_status=503,
        retryable=True,
        detail="overloaded, key=[redacted]",
    )
    assert failure_detail(refused) == "The upstream answered 503: overloaded, key=[redacted]"
    silent = UpstreamRefused("x", upstream_status=500, retryable=True)
    assert failure_detail(silent) == "The upstream answered 500 (it gave no reason)"
    rejected = UpstreamRejected("max_tokens is too large", upstream_status=400)
    assert failure_detail(rejected) == "The upstream answered 400: max_tokens is too large"
    timeout = UpstreamTimeout("The upstream channel `engine` timed out.")
    assert failure_detail(timeout) == "The upstream channel `engine` timed out."
    assert failure_detail(ValueError("internal")) is None
    odd = failure_detail("a\x00b\ud800" + "x" * 1000)
    assert odd is not None and len(odd) <= MAX_DETAIL and "\x00" not in odd
    odd.encode("utf-8")  # a database can hold it


def _ticks(svg: str) -> list[tuple[float, str]]:
    return [
        (float(x), text)
        for x, text in re.findall(r'<text class="tick" x="([0-9.]+)"[^>]*>([^<]*)</text>', svg)
    ]


def test_a_money_axis_reads_in_dollars_and_has_room_for_its_labels() -> None:
    days = [Bar("Nov 01", 0.0), Bar("Nov 02", 12_345.67)]
    svg = str(bar_chart(days, title="Spend per day", fmt=axis_usd))
    labels = [text for _, text in _ticks(svg)]
    assert "$12,345.67" in labels and "$0.00" in labels and "0" not in labels
    for x, text in _ticks(svg):
        if text.startswith("$"):  # right-aligned at x: it starts x - width in
            assert x - CHAR_W * len(text) >= 0, text
    counts = str(bar_chart([Bar("Nov 01", 120_000_000.0)], title="Tokens per day"))
    for x, text in _ticks(counts):
        if text[0].isdigit() and text != "0":
            assert x - CHAR_W * len(text) >= 0, text


def test_paths_break_only_after_a_slash_and_times_are_to_the_second() -> None:
    assert str(path_breaks("/v1/chat/completions")) == "/<wbr>v1/<wbr>chat/<wbr>completions"
    assert str(path_breaks("/v1/<b>")) == "/<wbr>v1/<wbr>&lt;b&gt;"
    moment = datetime(2026, 11, 29, 1, 2, 3, 999, tzinfo=UTC)
    assert to_second(moment) == "2026-11-29 01:02:03 UTC"
    assert setting(None) == "none" and setting(["a", "b"]) == "a, b" and setting(4) == "4"
