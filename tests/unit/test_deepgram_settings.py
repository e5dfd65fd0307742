"""A channel's ``deepgram:`` settings: only a ``deepgram`` channel takes them, and its
adapter always gets them (the defaults when the block is left out)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from parley.catalog_settings import ChannelSettings, DeepgramOptions


def channel(**fields: Any) -> ChannelSettings:
    return ChannelSettings.model_validate(
        {"name": "dg", "base_url": "https://api.deepgram.com/v1", "models": ["m"], **fields}
    )


def test_a_deepgram_channel_without_the_block_has_the_defaults() -> None:
    options = channel(type="deepgram").options
    assert options == DeepgramOptions()
    assert isinstance(options, DeepgramOptions)
    assert (options.punctuate, options.smart_format, options.language) == (True, True, None)
    assert options.sample_rate == 24000


def test_the_block_is_read_as_written() -> None:
    options = channel(
        type="deepgram", deepgram={"language": "pt-BR", "smart_format": False, "sample_rate": 16000}
    ).options
    assert options == DeepgramOptions(language="pt-BR", smart_format=False, sample_rate=16000)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"type": "openai", "deepgram": {}}, "deepgram is for channels of type deepgram"),
        ({"type": "deepgram", "deepgram": {"sample_rate": 22050}}, "sample_rate"),
        ({"type": "deepgram", "deepgram": {"language": "en us"}}, "language"),
        ({"type": "deepgram", "deepgram": {"punctuation": True}}, "punctuation"),
    ],
)
def test_what_is_wrong_is_named(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        channel(**fields)
