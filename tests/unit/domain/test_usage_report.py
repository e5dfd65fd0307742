"""Upstream usage becomes money only as valid counts within the allowance: any other
report is ignored and Parley's estimate billed instead, and no bill passes the allowance."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from parley.domain.usage import (
    MAX_COUNT,
    Allowance,
    Usage,
    reported_counts,
    reported_usage,
    with_estimate,
)

REQUIRED = ("prompt_tokens", "completion_tokens")


def test_valid_counts_are_the_usage() -> None:
    reported = {"prompt_tokens": 12, "completion_tokens": 0, "total_tokens": 12}
    assert reported_usage(reported, source="s") == Usage(prompt_tokens=12)


@pytest.mark.parametrize(
    "reported",
    [
        {"prompt_tokens": -1_000_000, "completion_tokens": 5},
        {"prompt_tokens": 5, "completion_tokens": -1},
        {"prompt_tokens": 2.5, "completion_tokens": 5},
        {"prompt_tokens": 5.0, "completion_tokens": 5},
        {"prompt_tokens": True, "completion_tokens": 5},
        {"prompt_tokens": "5", "completion_tokens": 5},
        {"prompt_tokens": 5},
        {"completion_tokens": 5},
        {"prompt_tokens": 5, "completion_tokens": None},
    ],
)
def test_anything_but_non_negative_integers_is_ignored_and_logged(
    reported: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="parley.usage"):
        assert reported_usage(reported, source="the upstream") is None
    assert "ignored the usage the upstream reported" in caplog.text


@pytest.mark.parametrize("reported", [None, {}, [], "12", {"total_tokens": 3}])
def test_no_report_is_none_and_quiet(reported: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="parley.usage"):
        assert reported_usage(reported, source="s") is None
    assert caplog.text == ""


def test_an_operation_without_output_reads_the_input_count_only() -> None:
    assert reported_usage({"prompt_tokens": 7}, source="s", completion=None) == Usage(
        prompt_tokens=7
    )
    assert reported_usage({"prompt_tokens": -7}, source="s", completion=None) is None


def test_other_dialects_name_their_counts() -> None:
    reported = {"input_tokens": 3, "output_tokens": 4}
    usage = reported_usage(reported, source="s", prompt="input_tokens", completion="output_tokens")
    assert usage == Usage(prompt_tokens=3, completion_tokens=4)


def test_a_usage_within_the_allowance_is_unchanged() -> None:
    usage = Usage(prompt_tokens=10, completion_tokens=5, estimated=True)
    assert Allowance(prompt_tokens=10, completion_tokens=5).cap(usage) is usage


def test_a_usage_above_the_allowance_is_capped_field_by_field() -> None:
    usage = Usage(prompt_tokens=50, completion_tokens=13_107_200, characters=9, audio_ms=9)
    capped = Allowance(prompt_tokens=40, completion_tokens=10, characters=3).cap(usage)
    assert capped == Usage(
        prompt_tokens=40, completion_tokens=10, characters=3, audio_ms=0, estimated=True
    )


def test_an_open_ended_allowance_leaves_the_output_uncapped() -> None:
    usage = Usage(prompt_tokens=50, completion_tokens=5000)
    capped = Allowance(prompt_tokens=40, completion_tokens=1024, open_ended=True).cap(usage)
    assert capped == Usage(prompt_tokens=40, completion_tokens=5000, estimated=True)


ABSURD = [1e30, 1.5e300, float("inf"), float("nan"), "77777777", -5, True, 5.0, MAX_COUNT + 1]


@pytest.mark.parametrize("count", ABSURD, ids=repr)
@pytest.mark.parametrize("name", ["prompt_tokens", "completion_tokens", "cached_tokens"])
def test_every_count_of_a_report_is_validated(
    name: str, count: Any, caplog: pytest.LogCaptureFixture
) -> None:
    reported = {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": None, name: count}
    with caplog.at_level(logging.WARNING, logger="parley.usage"):
        assert reported_counts(reported, source="s", required=REQUIRED) is None
    assert f"ignored the usage s reported ({name}=" in caplog.text


def test_an_absent_optional_count_is_zero() -> None:
    reported = {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": None}
    assert reported_counts(reported, source="s", required=REQUIRED) == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cached_tokens": 0,
    }


def test_a_report_past_the_allowance_bills_its_estimate_instead() -> None:
    estimate = Usage(prompt_tokens=8, completion_tokens=3, estimated=True)
    report = with_estimate(Usage(prompt_tokens=9, completion_tokens=77_777_777), estimate)
    assert report.fallback is estimate and not report.estimated
    billed = Allowance(prompt_tokens=40, completion_tokens=10).cap(report)
    assert billed == estimate and billed.estimated


def test_a_report_within_the_allowance_is_billed_as_reported() -> None:
    estimate = Usage(prompt_tokens=8, completion_tokens=3, estimated=True)
    report = with_estimate(Usage(prompt_tokens=9, completion_tokens=10), estimate)
    assert Allowance(prompt_tokens=40, completion_tokens=10).cap(report) is report


def test_an_estimate_past_the_allowance_is_capped() -> None:
    estimate = Usage(prompt_tokens=8, completion_tokens=300, estimated=True)
    report = with_estimate(Usage(prompt_tokens=9, completion_tokens=77_777_777), estimate)
    billed = Allowance(prompt_tokens=40, completion_tokens=10).cap(report)
    assert billed == Usage(prompt_tokens=8, completion_tokens=10, estimated=True)


def test_search_units_past_the_allowance_bill_the_estimate() -> None:
    estimate = Usage(prompt_tokens=30, search_units=2, estimated=True)
    reported = with_estimate(Usage(prompt_tokens=20, search_units=9), estimate)
    assert reported.search_units == 9
    allowance = Allowance(prompt_tokens=100, search_units=2)
    assert allowance.cap(reported) == estimate
    assert allowance.cap(Usage(prompt_tokens=20, search_units=2)).search_units == 2
