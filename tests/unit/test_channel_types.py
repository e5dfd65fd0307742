"""Channel types are checked against the provider registry, not a list of names."""

from __future__ import annotations

from pathlib import Path

import pytest

from parley.http import HttpClient
from parley.pipeline.services import Services
from parley.providers.openai import OpenAIAdapter
from parley.providers.registry import ProviderRegistry, check_channel_types, check_image_channels
from parley.settings import ConfigError, Settings


def settings_with_types(*types: str, workdir: Path | None = None) -> Settings:
    channels = [
        {"name": f"c{i}", "type": kind, "base_url": "http://127.0.0.1:9", "models": ["m"]}
        for i, kind in enumerate(types)
    ]
    config: dict[str, object] = {"channels": channels, "models": [{"name": "m"}]}
    if workdir is not None:
        config["database"] = {"url": f"sqlite:///{workdir / 'parley.db'}"}
    return Settings.model_validate(config)


def test_an_unknown_type_is_one_line_naming_the_field_and_the_known_types() -> None:
    registry = ProviderRegistry.default(HttpClient())
    settings = settings_with_types("anthropic", "watsonx")
    with pytest.raises(ConfigError) as refused:
        check_channel_types(settings.channels, registry.types())
    known = ", ".join(sorted(registry.types()))  # other adapters join as they register
    assert {"anthropic", "llamacpp", "ollama", "openai", "vllm"} <= registry.types()
    assert str(refused.value) == (
        f"channels[1].type: unknown channel type 'watsonx' (known: {known})"
    )


def test_a_type_is_known_once_an_adapter_is_registered_for_it() -> None:
    http = HttpClient()
    registry = ProviderRegistry.default(http)
    settings = settings_with_types("made-up-speech")
    with pytest.raises(ConfigError):
        check_channel_types(settings.channels, registry.types())
    registry.register("made-up-speech", chat=OpenAIAdapter(http))
    check_channel_types(settings.channels, registry.types())


async def test_services_refuse_to_start_with_an_unknown_type(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"channels\[0\]\.type"):
        await Services.start(settings_with_types("watsonx", workdir=tmp_path))
    assert not (tmp_path / "parley.db").exists()


def test_an_image_model_on_a_channel_that_cannot_draw_is_refused_naming_both() -> None:
    registry = ProviderRegistry.default(HttpClient())
    config = {
        "channels": [
            {"name": "a", "type": "azure-openai", "base_url": "http://127.0.0.1:9",
             "models": ["painter"]},
            {"name": "b", "type": "anthropic", "base_url": "http://127.0.0.1:9",
             "models": ["chat", "painter"]},
        ],
        "models": [{"name": "painter", "kind": "image"}, {"name": "chat"}],
    }  # fmt: skip
    settings = Settings.model_validate(config)
    assert {"openai", "vllm", "azure-openai"} <= registry.image_types()
    with pytest.raises(ConfigError, match=r"channels\[1\]\.models: the channel type 'anthropic' "
                       r"cannot serve the image model 'painter'"):  # fmt: skip
        check_image_channels(settings.channels, settings.models, registry)
