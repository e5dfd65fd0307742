"""Prices and costs. Money is integer nano-dollars (1e-9 USD) everywhere.

Nano-dollars, not micro-dollars: the default chat model costs $0.00001 per 1K input
tokens, i.e. $1e-8 a token, so a short call costs well under one micro-dollar and a
micro-dollar ledger would record zero. Nano-dollars keep every configured price with up to
nine decimals per token exact, and a signed 64-bit column still holds $9.2 billion.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

NANOS_PER_USD = 1_000_000_000
NANOS_PER_CENT = 10_000_000


def usd_to_nanos(usd: Decimal | float | int | str) -> int:
    return int((Decimal(str(usd)) * NANOS_PER_USD).to_integral_value(ROUND_HALF_UP))


def nanos_to_usd(nanos: int) -> float:
    return nanos / NANOS_PER_USD


def nanos_to_cents(nanos: int) -> float:
    return nanos / NANOS_PER_CENT


@dataclass(frozen=True, slots=True)
class Price:
    """Nano-dollars per 1K input tokens, 1K output tokens, 1K characters, one minute; per
    1K input tokens read from an upstream's prompt cache (``cached_input_per_1k``) or
    written to it (``cache_write_per_1k``), which the configuration defaults to the input
    price; and per search unit (a rerank's query over up to 100 documents, as Cohere
    bills)."""

    input_per_1k: int = 0
    output_per_1k: int = 0
    per_1k_characters: int = 0
    per_minute: int = 0
    cached_input_per_1k: int = 0
    cache_write_per_1k: int = 0
    per_search_unit: int = 0

    def cost(
        self,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        characters: int = 0,
        audio_ms: int = 0,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
        search_units: int = 0,
    ) -> int:
        """Exact cost in nano-dollars, rounded half-up once at the end. ``prompt_tokens``
        counts every input token; the cached ones among them are priced as such."""
        fresh = max(prompt_tokens - cached_tokens - cache_write_tokens, 0)
        thousandths = (
            fresh * self.input_per_1k
            + cached_tokens * self.cached_input_per_1k
            + cache_write_tokens * self.cache_write_per_1k
            + completion_tokens * self.output_per_1k
            + characters * self.per_1k_characters
        )
        numerator = thousandths * 60_000 + audio_ms * self.per_minute * 1000
        whole, rest = divmod(numerator, 60_000_000)
        return whole + (1 if rest * 2 >= 60_000_000 else 0) + search_units * self.per_search_unit
