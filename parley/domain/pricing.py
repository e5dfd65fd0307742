"""Prices and costs. Money is integer nano-dollars (1e-9 USD) everywhere.

Nano-dollars, not micro-dollars: the default chat model costs $0.00001 per 1K input
tokens, i.e. $1e-8 a token, so a short call costs well under one micro-dollar and a
micro-dollar ledger would record zero. Nano-dollars keep every configured price with up to
nine decimals per token exact, and a signed 64-bit column still holds $9.2 billion.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from decimal import ROUND_HALF_UP, Decimal

from parley.domain.images import ANY, AUTO, Grade

NANOS_PER_USD = 1_000_000_000
NANOS_PER_CENT = 10_000_000


def usd_to_nanos(usd: Decimal | float | int | str) -> int:
    return int((Decimal(str(usd)) * NANOS_PER_USD).to_integral_value(ROUND_HALF_UP))


def nanos_to_usd(nanos: int) -> float:
    return nanos / NANOS_PER_USD


def nanos_to_cents(nanos: int) -> float:
    return nanos / NANOS_PER_CENT


ImagePrices = tuple[tuple[str, str, int], ...]
"""A model's ``per_image`` table: (size, quality, nano-dollars an image), either part
``*`` for any value."""


@dataclass(frozen=True, slots=True)
class Price:
    """Nano-dollars per 1K input tokens, 1K output tokens, 1K characters, one minute; per
    1K input tokens read from an upstream's prompt cache (``cached_input_per_1k``) or
    written to it (``cache_write_per_1k``), which the configuration defaults to the input
    price; per search unit (a rerank's query over up to 100 documents, as Cohere bills).
    An image model is priced per image by grade (``per_image``), or by tokens: text
    input at ``input_per_1k``, image input at ``image_input_per_1k``, output at
    ``output_per_1k``. A realtime model prices its audio tokens on their own: input
    audio at ``audio_input_per_1k`` (``cached_audio_input_per_1k`` when read from the
    cache) and output audio at ``audio_output_per_1k``."""

    input_per_1k: int = 0
    output_per_1k: int = 0
    per_1k_characters: int = 0
    per_minute: int = 0
    cached_input_per_1k: int = 0
    cache_write_per_1k: int = 0
    per_search_unit: int = 0
    per_image: ImagePrices = ()
    image_input_per_1k: int = 0
    audio_input_per_1k: int = 0
    cached_audio_input_per_1k: int = 0
    audio_output_per_1k: int = 0
    tag: str = field(default="", init=False, compare=False, repr=False)
    """The unit prices as the request log keeps them: a JSON object of every price that
    is not zero, in nano-dollars (``per_image`` as ``{"SIZE/QUALITY": nanos}``). Made
    once, when the price is, so metering a call only copies a reference."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tag", price_tag(self))

    def image_price(self, grade: Grade) -> int | None:
        """Nano-dollars for one image of ``grade``; ``None`` when the table prices no
        such image. The most specific entry wins (size and quality, then size, then
        quality, then ``*``); an ``auto`` part, not yet known, takes the dearest entry
        it could turn out to be."""
        found: int | None = None
        for size, quality in _lookups(grade):
            prices = [
                nanos
                for entry_size, entry_quality, nanos in self.per_image
                if (entry_size == size or (size == AUTO and entry_size != ANY))
                and (entry_quality == quality or (quality == AUTO and entry_quality != ANY))
            ]
            if prices:
                found = max(prices) if found is None else max(found, *prices)
                if AUTO not in (size, quality):
                    return found
        return found

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
        image_tokens: int = 0,
        images: int = 0,
        image_grade: Grade | None = None,
        audio_tokens: int = 0,
        cached_audio_tokens: int = 0,
        audio_output_tokens: int = 0,
    ) -> int:
        """Exact cost in nano-dollars, rounded half-up once at the end. ``prompt_tokens``
        counts every input token; the cached ones, the image ones (``image_tokens``) and
        the audio ones (``audio_tokens``, ``cached_audio_tokens`` of them cached) among
        them are priced as such, as are the audio ones of ``completion_tokens``
        (``audio_output_tokens``). ``images`` of ``image_grade`` are priced by the
        ``per_image`` table (nothing when it prices no such image)."""
        image_tokens = min(image_tokens, prompt_tokens)
        cached_audio = min(cached_audio_tokens, audio_tokens, cached_tokens)
        fresh_audio = max(min(audio_tokens - cached_audio, prompt_tokens - cached_tokens), 0)
        audio_out = min(audio_output_tokens, completion_tokens)
        fresh = max(
            prompt_tokens - cached_tokens - cache_write_tokens - image_tokens - fresh_audio, 0
        )
        each = self.image_price(image_grade or Grade()) if images and self.per_image else None
        thousandths = (
            fresh * self.input_per_1k
            + image_tokens * self.image_input_per_1k
            + images * (each or 0) * 1000
            + (cached_tokens - cached_audio) * self.cached_input_per_1k
            + cache_write_tokens * self.cache_write_per_1k
            + fresh_audio * self.audio_input_per_1k
            + cached_audio * self.cached_audio_input_per_1k
            + (completion_tokens - audio_out) * self.output_per_1k
            + audio_out * self.audio_output_per_1k
            + characters * self.per_1k_characters
        )
        numerator = thousandths * 60_000 + audio_ms * self.per_minute * 1000
        whole, rest = divmod(numerator, 60_000_000)
        return whole + (1 if rest * 2 >= 60_000_000 else 0) + search_units * self.per_search_unit


def price_tag(price: Price) -> str:
    """``Price.tag``: the non-zero unit prices as compact JSON, keys sorted."""
    units: dict[str, object] = {}
    for unit in fields(price):
        if unit.name == "tag":
            continue
        amount = getattr(price, unit.name)
        if unit.name == "per_image":
            if amount:
                units["per_image"] = {f"{size}/{quality}": nanos for size, quality, nanos in amount}
        elif amount:
            units[unit.name] = amount
    return json.dumps(units, sort_keys=True, separators=(",", ":"))


def unit_prices(tag: str | None) -> dict[str, object] | None:
    """A ``Price.tag`` read back, in USD (``per_image`` a table of USD by grade); ``None``
    for a line that recorded none (a refusal, a failed call, a line older than it)."""
    if not tag:
        return None
    units: dict[str, object] = {}
    for unit, nanos in json.loads(tag).items():
        if isinstance(nanos, dict):
            units[unit] = {grade: nanos_to_usd(each) for grade, each in nanos.items()}
        else:
            units[unit] = nanos_to_usd(nanos)
    return units


def _lookups(grade: Grade) -> tuple[tuple[str, str], ...]:
    """The table entries for ``grade``, most specific first."""
    size, quality = grade.size, grade.quality
    return ((size, quality), (size, ANY), (ANY, quality), (ANY, ANY))
