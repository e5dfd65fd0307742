"""Engines' voice rosters: fetched through the model's routes, kept for ``TTL_SECONDS``.

The voice list endpoint always fetches (and refreshes the copy); a speech call uses the
copy, fetching it when it is older than ``TTL_SECONDS``, to tell a built-in voice from an
unknown one (which gets the engine's default instead of an engine error).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from parley.errors import ServiceUnavailable, UpstreamError
from parley.providers.base import VOICES, EngineRoster, Target, VoicesUnsupported
from parley.providers.registry import ProviderRegistry

TTL_SECONDS = 30.0


class Routed(Protocol):
    """What a roster's fetch reads of a route (the pipeline's ``Route``, which the
    endpoints hand in: voices sit below the pipeline)."""

    @property
    def provider_type(self) -> str: ...

    @property
    def target(self) -> Target: ...


Route = TypeVar("Route", bound=Routed)


class Rosters(Generic[Route]):
    def __init__(
        self, providers: ProviderRegistry, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._providers = providers
        self._clock = clock
        self._kept: dict[str, tuple[float, EngineRoster, Route]] = {}
        self._unlistable: dict[str, float] = {}

    async def fetch(self, model: str, routes: Sequence[Route]) -> tuple[EngineRoster, Route]:
        """The roster of the first route that gives one. ``VoicesUnsupported`` when the
        engine has no voice management; the last ``UpstreamError`` when none answered."""
        if not routes:
            raise ServiceUnavailable(f"No channel is configured to serve the model `{model}`.")
        failure: UpstreamError | None = None
        for route in routes:
            try:
                roster = await self._providers.serving(VOICES, route.provider_type).list_voices(
                    route.target
                )
            except VoicesUnsupported:
                raise
            except UpstreamError as error:
                failure = error
                continue
            self._kept[model] = (self._clock(), roster, route)
            return roster, route
        assert failure is not None
        raise failure

    async def builtin(self, model: str, routes: Sequence[Route]) -> frozenset[str] | None:
        """The engine's built-in voice ids (a recent copy), or ``None`` when they cannot be
        known (no voice management, or the engine does not answer)."""
        kept = self._kept.get(model)
        if kept is not None and self._clock() - kept[0] < TTL_SECONDS:
            return frozenset(kept[1].builtin)
        unlistable = self._unlistable.get(model)
        if unlistable is not None and self._clock() - unlistable < TTL_SECONDS:
            return None
        try:
            roster, _ = await self.fetch(model, routes)
        except VoicesUnsupported:
            self._unlistable[model] = self._clock()
            return None
        except (UpstreamError, ServiceUnavailable):
            return None
        return frozenset(roster.builtin)
