"""Each provider's own hint of when to come back, read into a refusal's ``retry_after``
(the breakers' cool-down): headers for OpenAI-shaped and Anthropic upstreams, the body's
``google.rpc.RetryInfo`` for Google's."""

from __future__ import annotations

import orjson
import pytest

from parley.providers.gemini.refusal import google_refusal, stream_failure
from parley.providers.openai.refusal import duration, refusal, retry_after

QUOTA = {
    "error": {
        "code": 429,
        "message": "You exceeded your current quota.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "30s"},
        ],
    }
}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("1.5s", 1.5)],
)
def test_durations_in_openais_and_googles_spelling(text: str, seconds: float) -> None:
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "30", "-3s", "3 s", "0s", "soon", "3sm"])
def test_what_is_not_a_positive_duration_is_none(text: str) -> None:
    assert duration(text) is None


def test_headers_retry_after_in_seconds_milliseconds_or_an_http_date() -> None:
    assert retry_after({b"retry-after": b"12"}) == 12.0
    assert retry_after({b"retry-after-ms": b"1500", b"retry-after": b"9"}) == 1.5
    dated = {
        b"retry-after": b"Wed, 21 Oct 2015 07:28:30 GMT",
        b"date": b"Wed, 21 Oct 2015 07:28:00 GMT",
    }
    assert retry_after(dated) == 30.0
    assert retry_after({b"retry-after": b"Wed, 21 Oct 2015 07:28:30 GMT"}) is None
    assert retry_after({b"retry-after": b"0"}) is None


def test_an_openai_limit_that_is_spent_says_when_it_resets() -> None:
    spent = {
        b"x-ratelimit-remaining-requests": b"0",
        b"x-ratelimit-reset-requests": b"1m30s",
        b"x-ratelimit-remaining-tokens": b"1200",
        b"x-ratelimit-reset-tokens": b"6m0s",
    }
    assert retry_after(spent) == 90.0
    both = {**spent, b"x-ratelimit-remaining-tokens": b"0"}
    assert retry_after(both) == 360.0
    assert retry_after({**both, b"retry-after": b"2"}) == 2.0
    unspent = {**spent, b"x-ratelimit-remaining-requests": b"3"}
    assert retry_after(unspent) is None


def test_a_refusal_keeps_the_headers_hint() -> None:
    error = refusal("c", 429, b"{}", None, {b"retry-after-ms": b"2500"})
    assert error.retry_after == 2.5


def test_googles_retry_info_in_the_body_is_the_hint() -> None:
    error = google_refusal("g", 429, orjson.dumps(QUOTA), None, {})
    assert error.retry_after == 30.0 and error.retryable
    half = orjson.loads(orjson.dumps(QUOTA))
    half["error"]["details"][1]["retryDelay"] = "1.5s"
    assert google_refusal("g", 429, orjson.dumps(half), None, {}).retry_after == 1.5
    told = google_refusal("g", 429, orjson.dumps(QUOTA), None, {b"retry-after": b"7"})
    assert told.retry_after == 7.0  # a header, when Google sends one, says it first
    assert google_refusal("g", 429, b"not json", None, {}).retry_after is None
    assert stream_failure("g", QUOTA, None).retry_after == 30.0
