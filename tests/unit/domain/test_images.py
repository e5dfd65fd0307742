"""Image grades, their prices and token estimates (``domain/images.py``, ``Price``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from parley.domain.images import (
    Grade,
    estimated_output_tokens,
    is_size,
    output_ceiling,
    parse_grade,
    sniff_image,
)
from parley.domain.pricing import Price, usd_to_nanos
from parley.domain.usage import Allowance, Usage
from parley.settings import ModelSettings

TABLE = Price(
    per_image=(
        ("1024x1024", "low", usd_to_nanos("0.011")),
        ("1024x1024", "high", usd_to_nanos("0.167")),
        ("1536x1024", "high", usd_to_nanos("0.25")),
        ("1024x1024", "*", usd_to_nanos("0.04")),
        ("*", "medium", usd_to_nanos("0.063")),
    )
)


def test_the_most_specific_entry_prices_a_grade() -> None:
    assert TABLE.image_price(Grade("1024x1024", "high")) == usd_to_nanos("0.167")
    assert TABLE.image_price(Grade("1024x1024", "standard")) == usd_to_nanos("0.04")
    assert TABLE.image_price(Grade("1536x1024", "medium")) == usd_to_nanos("0.063")
    assert TABLE.image_price(Grade("512x512", "low")) is None


def test_an_auto_part_takes_the_dearest_entry_it_could_be() -> None:
    assert TABLE.image_price(Grade("auto", "high")) == usd_to_nanos("0.25")
    assert TABLE.image_price(Grade("1024x1024", "auto")) == usd_to_nanos("0.167")
    assert TABLE.image_price(Grade()) == usd_to_nanos("0.25")


def test_images_cost_per_image_and_input_image_tokens_at_their_own_price() -> None:
    grade = Grade("1024x1024", "low")
    assert TABLE.cost(images=3, image_grade=grade) == 3 * usd_to_nanos("0.011")
    tokens = Price(input_per_1k=5_000, image_input_per_1k=10_000, output_per_1k=40_000)
    # 100 text tokens at $5/M, 200 image tokens at $10/M, 1000 output at $40/M
    assert tokens.cost(prompt_tokens=300, image_tokens=200, completion_tokens=1000) == (
        100 * 5 + 200 * 10 + 1000 * 40
    )


def test_the_allowance_caps_images_and_keeps_their_grade() -> None:
    grade = Grade("1024x1024", "high")
    allowance = Allowance(images=2, image_grade=grade)
    assert allowance.cap(Usage(images=2, image_grade=grade)).images == 2
    capped = allowance.cap(Usage(images=5, image_grade=grade))
    assert (capped.images, capped.image_grade, capped.estimated) == (2, grade, True)


def test_grades_settle_only_their_auto_parts() -> None:
    asked = Grade("auto", "low")
    assert asked.settled("1536x1024", "high") == Grade("1536x1024", "low")
    assert Grade().settled("nonsense", None) == Grade()
    assert parse_grade("1024x1024/high") == Grade("1024x1024", "high")
    assert str(Grade("1024x1024", "high")) == "1024x1024/high"


def test_output_tokens_follow_openais_counts_and_the_ceiling_is_above() -> None:
    assert estimated_output_tokens(Grade("1024x1024", "low")) == 273
    assert estimated_output_tokens(Grade("1024x1024", "medium")) == 1056
    assert estimated_output_tokens(Grade("1024x1024", "high")) == 4162
    for quality in ("low", "medium", "high", "auto"):
        grade = Grade("1536x1024", quality)
        assert output_ceiling(grade) > estimated_output_tokens(grade)


@pytest.mark.parametrize(
    ("head", "media_type"),
    [
        (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "image/png"),
        (b"\xff\xd8\xff\xe0\0\x10JFIF", "image/jpeg"),
        (b"RIFF\x24\0\0\0WEBPVP8 ", "image/webp"),
        (b"GIF89a\x01\0\x01\0", None),
        (b"<svg xmlns=", None),
        (b"", None),
    ],
)
def test_images_are_known_by_their_magic_bytes(head: bytes, media_type: str | None) -> None:
    assert sniff_image(head) == media_type


def test_sizes_are_auto_or_width_by_height_within_bounds() -> None:
    assert is_size("auto") and is_size("1024x1536") and is_size("3840x2160")
    assert not is_size("1024") and not is_size("0x10") and not is_size("99999x1")


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ({"kind": "chat", "prices": {"per_image": {"*": "0.04"}}}, "only for kind: image"),
        (
            {"kind": "image", "prices": {"per_image": {"*": "0.04"}, "output_per_1k": "0.04"}},
            "not both",
        ),
        ({"kind": "image", "prices": {"per_image": {"1024/high": "0.04"}}}, "is not a grade"),
        ({"kind": "image", "prices": {"per_image": {"*/ultra": "0.04"}}}, "is not a grade"),
        ({"kind": "image", "prices": {"per_image": {"*": "-1"}}}, "must not be negative"),
    ],
)
def test_settings_refuse_image_prices_that_cannot_be(
    model: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ModelSettings.model_validate({"name": "m", **model})


def test_settings_take_a_grade_table() -> None:
    table = {"1024x1024/high": "0.167", "1024x1024": "0.04", "*/low": "0.01", "*": "0.02"}
    prices = {"per_image": table}
    model = ModelSettings.model_validate({"name": "m", "kind": "image", "prices": prices})
    assert model.prices.per_image is not None and len(model.prices.per_image) == 4
