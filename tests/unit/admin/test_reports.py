"""Usage reports: parsing the query, summing rollups over the chosen dimensions, CSV."""

from __future__ import annotations

from datetime import date

import pytest

from parley.admin.reports import build_report, parse_query, table
from parley.domain.usage import GroupDailyUsage
from parley.errors import InvalidRequest


def row(day: int, group: int, model: str, requests: int, cost: int) -> GroupDailyUsage:
    return GroupDailyUsage(group, date(2024, 5, day), model, requests, 10, 5, 0, 1500, cost)


ROWS = [
    row(1, 1, "m1", 2, 1_000_000_000),
    row(1, 2, "m1", 1, 500_000_000),
    row(2, 1, "m2", 3, 250_000_000),
]
NAMES = {1: "alpha", 2: "beta"}


def test_rows_are_summed_over_the_dimensions_asked_for() -> None:
    report = build_report(
        parse_query(since="2024-05-01", until="2024-05-02", by="group"), ROWS, NAMES
    )
    view = report.view()
    assert [(r["group"], r["requests"], r["cost_usd"]) for r in view["data"]] == [
        ("alpha", 5, 1.25),
        ("beta", 1, 0.5),
    ]
    assert view["total"]["requests"] == 6 and view["total"]["audio_seconds"] == 4.5
    by_day_model = build_report(
        parse_query(since="2024-05-01", until="2024-05-02", by="day,model"), ROWS, NAMES
    )
    assert [(r["day"], r["model"], r["requests"]) for r in by_day_model.view()["data"]] == [
        ("2024-05-01", "m1", 3),
        ("2024-05-02", "m2", 3),
    ]


def test_csv_and_table() -> None:
    report = build_report(parse_query(since="2024-05-01", until="2024-05-31"), ROWS, NAMES)
    lines = report.csv().splitlines()
    assert lines[0] == (
        "group,model,requests,prompt_tokens,cached_tokens,cache_write_tokens,"
        "completion_tokens,total_tokens,characters,audio_seconds,cost_usd"
    )
    assert lines[1] == "alpha,m1,2,10,0,0,5,15,0,1.5,1.0"
    text = table(report).splitlines()
    assert text[0].split() == ["group", "model", "requests", "tokens", "cost_usd"]
    assert text[-1].split() == ["total", "6", "45", "1.750000"]


@pytest.mark.parametrize(
    ("since", "until", "by", "param"),
    [
        ("2024-5-1", None, None, "since"),
        ("2024-05-03", "2024-05-02", None, "until"),
        ("2023-01-01", "2024-05-02", None, "since"),
        (None, None, "group,group", "by"),
        (None, None, " , ", "by"),
        (None, None, "hour", "by"),
    ],
)
def test_bad_queries_name_their_field(
    since: str | None, until: str | None, by: str | None, param: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_query(since=since, until=until, by=by)
    assert caught.value.param == param
