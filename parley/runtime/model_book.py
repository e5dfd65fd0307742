"""Which models the gateway serves besides the config file's: those managed from the
admin surface, kept in the database.

The book is refreshed with the channels (``Services.reload_channels``, every
``limits.cache_refresh_seconds``, on every worker and instance): it reads the stored
models, and when any changed it makes them into the registry's ``LiveModel`` (each with
its scheduled price change, if any) and says which channels serve them. ``Services``
hands those to the ``ModelRegistry`` and builds a new ``Router``; the request path only
reads memory. A stored model that is disabled, named like a model or alias of the config
file, or whose settings no longer validate is not served (the last two are logged,
naming the model only).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from parley.domain.models import LiveModel
from parley.domain.stored_models import StoredModel
from parley.runtime.model_specs import model_spec
from parley.settings import ChannelModel, ChannelSettings, ModelSettings
from parley.store.base import ModelStore

log = logging.getLogger("parley.models")
SPEC_FIELDS = ("kind", "aliases", "retired_aliases", "context_window", "vision", "owned_by")
"""The config file's model fields a stored model takes (with ``name`` and ``prices``)."""


def model_settings(name: str, spec: dict[str, Any], prices: dict[str, Any]) -> ModelSettings:
    """A stored model's settings at ``prices``, validated as the config file's are.
    Raises pydantic's ``ValidationError``."""
    fields = {field: spec[field] for field in SPEC_FIELDS if field in spec}
    return ModelSettings.model_validate({**fields, "name": name, "prices": prices})


def live_model(stored: StoredModel) -> LiveModel:
    """The stored model as the registry serves it: priced now, and from its scheduled
    change on. Raises pydantic's ``ValidationError``."""
    created = int(stored.created_at.timestamp())
    spec = model_spec(model_settings(stored.name, stored.spec, stored.prices), created)
    if stored.next_prices is None or stored.next_prices_from is None:
        return LiveModel(spec)
    then = model_spec(model_settings(stored.name, stored.spec, stored.next_prices), created)
    return LiveModel(spec, then, stored.next_prices_from.timestamp())


def channels_of(stored: StoredModel) -> list[tuple[str, str]]:
    """(channel, upstream model name) for each channel that serves the stored model."""
    return [
        (entry["channel"], entry.get("upstream") or stored.name)
        for entry in stored.spec.get("channels", [])
    ]


class ModelBook:
    def __init__(self, configured: Sequence[ModelSettings]) -> None:
        self.configured_names = frozenset(
            name
            for model in configured
            for name in (model.name, *model.aliases, *model.retired_aliases)
        )
        self.stored: list[StoredModel] = []
        self.live: tuple[LiveModel, ...] = ()
        """The stored models served: enabled, valid, shadowing no configured name."""
        self._routes: dict[str, list[ChannelModel]] = {}
        """What each channel serves of the live models, by channel name."""
        self._seen: tuple[tuple[str, datetime], ...] | None = None

    async def load(self, store: ModelStore) -> bool:
        """Read the stored models; True when they changed since the last load."""
        stored = await store.list_models()
        seen = tuple((model.name, model.updated_at) for model in stored)
        if seen == self._seen:
            return False
        self._seen, self.stored = seen, stored
        live: list[LiveModel] = []
        routes: dict[str, list[ChannelModel]] = {}
        for model in stored:
            made = self._usable(model)
            if made is None:
                continue
            live.append(made)
            for channel, upstream in channels_of(model):
                routes.setdefault(channel, []).append(
                    ChannelModel(name=model.name, upstream=upstream)
                )
        self.live, self._routes = tuple(live), routes
        return True

    def _usable(self, model: StoredModel) -> LiveModel | None:
        if not model.enabled:
            return None
        names = (model.name, *model.spec.get("aliases", ()), *model.spec.get("retired_aliases", ()))
        if any(name in self.configured_names for name in names):
            log.warning("stored model %s is ignored: the config file names it", model.name)
            return None
        try:
            return live_model(model)
        except (ValidationError, KeyError, TypeError):
            log.warning("stored model %s is not served: its settings are invalid", model.name)
            return None

    def serve(self, channels: Sequence[ChannelSettings]) -> tuple[ChannelSettings, ...]:
        """``channels`` each serving, besides its own models, the live models that name
        it (a model a channel already serves keeps the channel's own entry)."""
        return tuple(self._serving(channel) for channel in channels)

    def _serving(self, channel: ChannelSettings) -> ChannelSettings:
        extra = [
            entry
            for entry in self._routes.get(channel.name, ())
            if all(own.name != entry.name for own in channel.models)
        ]
        if not extra:
            return channel
        return channel.model_copy(update={"models": (*channel.models, *extra)})

    def find(self, name: str) -> StoredModel | None:
        return next((model for model in self.stored if model.name == name), None)
