"""Stage 3: public model → the channels that serve it, in the order to try them.

Channels with a higher ``priority`` are tried first; among equals the order is drawn at
random, weighted by ``weight``, so load spreads and a failed channel falls to the next.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

from parley.providers.base import Target
from parley.settings import ChannelSettings


@dataclass(frozen=True, slots=True)
class Route:
    """One way to serve a model: which adapter, where, and how well liked."""

    provider_type: str
    target: Target
    priority: int
    weight: int
    model: str = ""
    """The public model this route serves (a fallback's, when the call fell back)."""
    breaker_key: str = ""
    """The channel x upstream model breaker (``runtime/breaker.py``)."""
    first_token: float = 60.0
    """Seconds a stream may take to send its first event before the next route."""
    total: float | None = None
    """Seconds the whole call may take, from the attempt's start; ``None``: unbounded."""


class Router:
    def __init__(self, channels: Iterable[ChannelSettings], rng: random.Random) -> None:
        self._rng = rng
        routes: defaultdict[str, list[Route]] = defaultdict(list)
        for channel in channels:
            for served in channel.models:
                target = Target(
                    channel=channel.name,
                    base_url=channel.base_url,
                    api_key=channel.api_key,
                    model=served.upstream or served.name,
                    connect_timeout=channel.timeouts.connect,
                    read_timeout=channel.timeouts.read,
                    idle_timeout=channel.timeouts.idle,
                    options=channel.options,
                    type_name=channel.type,
                    native_responses=channel.responses == "native",
                )
                timeouts = channel.timeouts
                routes[served.name].append(
                    Route(
                        channel.type,
                        target,
                        channel.priority,
                        channel.weight,
                        model=served.name,
                        breaker_key=f"{channel.name}:{target.model}",
                        first_token=timeouts.first_token,
                        total=timeouts.total,
                    )
                )
        self._routes = {
            model: sorted(found, key=lambda route: -route.priority)
            for model, found in routes.items()
        }
        # Models whose every priority tier holds one channel have one order: no draw.
        self._fixed = {
            model: tuple(found)
            for model, found in self._routes.items()
            if len({route.priority for route in found}) == len(found)
        }

    def routes(self, model: str) -> Sequence[Route]:
        """Every route for ``model``, best first; empty when no channel serves it."""
        fixed = self._fixed.get(model)
        if fixed is not None:
            return fixed
        ordered: list[Route] = []
        for _, tier in groupby(self._routes.get(model, ()), key=lambda route: route.priority):
            ordered.extend(self._weighted_order(list(tier)))
        return ordered

    def served(self) -> frozenset[str]:
        return frozenset(self._routes)

    def _weighted_order(self, tier: list[Route]) -> list[Route]:
        if len(tier) == 1:
            return tier
        ordered: list[Route] = []
        left = list(tier)
        while left:
            pick = self._rng.choices(range(len(left)), weights=[r.weight for r in left])[0]
            ordered.append(left.pop(pick))
        return ordered
