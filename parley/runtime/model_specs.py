"""The config file's model settings made into the registry's ``ModelSpec``: prices in
nano-dollars (the batch price beside), the options of speech and transcription models.

The config file's models and those managed live (``model_book.py``) are made the same
way, so a model priced alike bills alike wherever it was declared.
"""

from __future__ import annotations

from decimal import Decimal

from parley.domain.models import Cascade, ModelSpec
from parley.domain.pricing import ImagePrices, Price, usd_to_nanos
from parley.domain.speech import SpeechProfile
from parley.domain.transcripts import TranscriptionAbilities
from parley.settings import ModelSettings, Prices, Settings, SpeechOptions
from parley.voices.catalogue import load_catalogue


def model_specs(settings: Settings, created: int) -> list[ModelSpec]:
    return [model_spec(model, created) for model in settings.models]


def model_spec(model: ModelSettings, created: int) -> ModelSpec:
    prices = model.prices
    return ModelSpec(
        name=model.name,
        kind=model.kind,
        price=_price(prices, Decimal(1), None, None),
        batch_price=_price(
            prices, prices.batch_discount, prices.batch_input_per_1k, prices.batch_output_per_1k
        ),
        context_window=model.context_window,
        vision=model.vision,
        owned_by=model.owned_by,
        aliases=model.aliases,
        retired_aliases=model.retired_aliases,
        created=created,
        transcription=_abilities(model),
        speech=speech_profile(model.audio or SpeechOptions()) if model.kind == "speech" else None,
        cascade=_cascade(model),
    )


def _cascade(model: ModelSettings) -> Cascade | None:
    parts = model.cascade
    if parts is None:
        return None
    return Cascade(parts.transcription, parts.chat, parts.speech, parts.voice)


def _image_prices(prices: Prices, share: Decimal) -> ImagePrices:
    """The ``per_image`` table as (size, quality, nanos), each times ``share``; a grade
    without a quality is any quality (``*``)."""
    table = []
    for grade, usd in (prices.per_image or {}).items():
        size, _, quality = grade.partition("/")
        table.append((size, quality or "*", usd_to_nanos(usd * share)))
    return tuple(table)


def _price(
    prices: Prices, share: Decimal, input_per_1k: Decimal | None, output_per_1k: Decimal | None
) -> Price:
    """The model's prices, each times ``share`` (a batch discount), the input and output
    prices replaced by explicit ones when given."""
    return Price(
        input_per_1k=usd_to_nanos(
            prices.input_per_1k * share if input_per_1k is None else input_per_1k
        ),
        output_per_1k=usd_to_nanos(
            prices.output_per_1k * share if output_per_1k is None else output_per_1k
        ),
        per_1k_characters=usd_to_nanos(prices.per_1k_characters * share),
        per_minute=usd_to_nanos(prices.per_minute * share),
        cached_input_per_1k=usd_to_nanos(_or_input(prices.cached_input_per_1k, prices) * share),
        cache_write_per_1k=usd_to_nanos(_or_input(prices.cache_write_per_1k, prices) * share),
        per_search_unit=usd_to_nanos(prices.per_search_unit * share),
        per_image=_image_prices(prices, share),
        image_input_per_1k=usd_to_nanos(_or_input(prices.image_input_per_1k, prices) * share),
        audio_input_per_1k=usd_to_nanos((prices.audio_input_per_1k or 0) * share),
        cached_audio_input_per_1k=usd_to_nanos(_cached_audio(prices) * share),
        audio_output_per_1k=usd_to_nanos((prices.audio_output_per_1k or 0) * share),
    )


def _cached_audio(prices: Prices) -> Decimal:
    """The price of cached input audio, or the input audio price when the model sets none."""
    if prices.cached_audio_input_per_1k is not None:
        return prices.cached_audio_input_per_1k
    return prices.audio_input_per_1k or Decimal(0)


def _or_input(price: Decimal | None, prices: Prices) -> Decimal:
    """A cache price, or the input price when the model sets none."""
    return prices.input_per_1k if price is None else price


def speech_profile(options: SpeechOptions) -> SpeechProfile:
    """A speech model's profile; its catalogue file is read here, once."""
    return SpeechProfile(
        catalogue=load_catalogue(options.voices_catalogue),
        default_voice=options.default_voice,
        fallback_to_wav=options.unsupported_formats == "wav",
        quality_steps={str(level): steps for level, steps in (options.quality_steps or {}).items()},
        default_quality=options.default_quality,
        instruction=options.instruction,
        cloning=options.cloning,
        transcript_cloning=options.transcript_cloning,
        voice_listing=options.voice_listing,
        status_on_every_voice=options.status_on_every_voice,
        max_input_chars=options.max_input_chars,
        sample_rate=options.sample_rate,
        max_clip_bytes=options.max_clip_bytes,
        engine_clip_seconds=options.engine_clip_seconds,
    )


def _abilities(model: ModelSettings) -> TranscriptionAbilities | None:
    if model.kind != "transcription":
        return None
    options = model.transcription
    if options is None:
        return TranscriptionAbilities()
    return TranscriptionAbilities(options.translate, options.stream, options.formats)
