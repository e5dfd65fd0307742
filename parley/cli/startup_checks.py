"""What ``serve`` warns about at start-up: a configuration that is valid but will not work
as the operator probably meant."""

from __future__ import annotations

from parley.settings import Settings


def unserved_capabilities(settings: Settings) -> list[str]:
    """A warning for each capability whose model no channel serves (its calls would 503)."""
    canonical: dict[str, str] = {}
    for model in settings.models:
        for name in (model.name, *model.aliases, *model.retired_aliases):
            canonical[name] = model.name
    served = {
        canonical.get(entry.name, entry.name)
        for channel in settings.channels
        for entry in channel.models
    }
    return [
        f"capability {key} names model `{name}`, which no channel serves: "
        "its calls will fail with 503 until a channel lists it under `models`"
        for key, name in sorted(settings.capabilities.items())
        if canonical.get(name, name) not in served
    ]
