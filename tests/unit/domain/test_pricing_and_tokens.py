"""Money is exact integer nano-dollars; token estimates are close and never negative."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from parley.dialects.openai_chat import estimate_messages
from parley.domain.pricing import Price, nanos_to_cents, usd_to_nanos
from parley.domain.tokens import estimate_prompt, estimate_text

SPEC = Price(input_per_1k=usd_to_nanos("0.00001"), output_per_1k=usd_to_nanos("0.00003"))


def test_spec_prices_are_ten_and_thirty_nanos_a_token() -> None:
    assert (SPEC.input_per_1k, SPEC.output_per_1k) == (10_000, 30_000)
    assert SPEC.cost(prompt_tokens=1, completion_tokens=1) == 40
    assert SPEC.cost(prompt_tokens=1000, completion_tokens=1000) == 40_000


def test_usd_to_nanos_is_exact_for_decimals_and_floats() -> None:
    assert usd_to_nanos(Decimal("0.000000001")) == 1
    assert usd_to_nanos(0.1) == 100_000_000
    assert usd_to_nanos("2.5") == 2_500_000_000
    assert nanos_to_cents(10_000_000) == 1.0


def test_fractions_round_half_up_once_per_call() -> None:
    price = Price(input_per_1k=1)  # a thousandth of a nano-dollar a token
    assert price.cost(prompt_tokens=499) == 0
    assert price.cost(prompt_tokens=500) == 1
    assert price.cost(prompt_tokens=1499) == 1


def test_audio_and_characters() -> None:
    price = Price(per_minute=usd_to_nanos("0.006"), per_1k_characters=usd_to_nanos("0.015"))
    assert price.cost(audio_ms=60_000) == 6_000_000
    assert price.cost(audio_ms=30_000) == 3_000_000
    assert price.cost(characters=1000) == 15_000_000


@given(st.integers(0, 10**7), st.integers(0, 10**7), st.integers(0, 10**6))
def test_cost_is_additive_within_one_rounding(prompt: int, completion: int, rate: int) -> None:
    price = Price(input_per_1k=rate, output_per_1k=rate * 3)
    whole = price.cost(prompt_tokens=prompt, completion_tokens=completion)
    parts = price.cost(prompt_tokens=prompt) + price.cost(completion_tokens=completion)
    assert abs(whole - parts) <= 1
    assert whole >= 0


def test_estimates() -> None:
    assert estimate_text("") == 0
    assert estimate_text("abcd") == 1
    assert estimate_text("abcde") == 2
    assert estimate_messages([{"role": "user", "content": "abcd" * 10}]) == 3 + 4 + 10
    parts = [{"type": "text", "text": "abcd"}, {"type": "image_url", "image_url": {"url": "x"}}]
    assert estimate_messages([{"role": "user", "content": parts}]) == 3 + 4 + 1 + 768
    assert estimate_prompt("abcdefgh") == 2
    assert estimate_prompt(["abcd", "abcd"]) == 2
    assert estimate_prompt([1, 2, 3]) == 3
    assert estimate_prompt([[1, 2], [3]]) == 3


def test_cached_and_cache_written_input_tokens_have_their_own_prices() -> None:
    price = Price(
        input_per_1k=usd_to_nanos("0.003"),
        output_per_1k=usd_to_nanos("0.015"),
        cached_input_per_1k=usd_to_nanos("0.0003"),
        cache_write_per_1k=usd_to_nanos("0.00375"),
    )
    # 1,312 input tokens: 100 fresh, 1,000 read from the cache, 212 written to it.
    cost = price.cost(
        prompt_tokens=1312, completion_tokens=7, cached_tokens=1000, cache_write_tokens=212
    )
    # Per token: 3,000 nano-dollars fresh, 300 cached, 3,750 written, 15,000 output.
    assert cost == 100 * 3000 + 1000 * 300 + 212 * 3750 + 7 * 15000
    assert price.cost(prompt_tokens=10, cached_tokens=20) == 20 * 300  # no negative fresh


def test_search_units_are_priced_whole_beside_tokens() -> None:
    price = Price(input_per_1k=usd_to_nanos("0.00002"), per_search_unit=usd_to_nanos("0.002"))
    assert price.cost(search_units=1) == 2_000_000
    assert price.cost(search_units=3, prompt_tokens=1000) == 6_020_000
    assert Price(input_per_1k=5).cost(search_units=7) == 0  # a model not priced per unit


def test_audio_tokens_have_their_own_prices_in_and_out() -> None:
    price = Price(
        input_per_1k=usd_to_nanos("0.004"),
        output_per_1k=usd_to_nanos("0.016"),
        cached_input_per_1k=usd_to_nanos("0.0004"),
        audio_input_per_1k=usd_to_nanos("0.032"),
        cached_audio_input_per_1k=usd_to_nanos("0.0004"),
        audio_output_per_1k=usd_to_nanos("0.064"),
    )
    # 1,000 input tokens: 600 audio (100 of them cached), 400 text (50 cached);
    # 300 output tokens: 250 audio, 50 text.
    cost = price.cost(
        prompt_tokens=1000,
        completion_tokens=300,
        cached_tokens=150,
        audio_tokens=600,
        cached_audio_tokens=100,
        audio_output_tokens=250,
    )
    per_token = {"text": 4000, "cached": 400, "audio": 32000, "audio_out": 64000, "out": 16000}
    assert cost == (
        350 * per_token["text"]
        + 50 * per_token["cached"]
        + 500 * per_token["audio"]
        + 100 * per_token["cached"]
        + 50 * per_token["out"]
        + 250 * per_token["audio_out"]
    )
    # counts past their totals never bill more than the totals hold
    assert price.cost(prompt_tokens=10, audio_tokens=50) == 10 * 32000
    assert price.cost(completion_tokens=10, audio_output_tokens=50) == 10 * 64000
