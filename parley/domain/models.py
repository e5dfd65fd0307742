"""The model registry: public names, aliases, retired aliases, kinds and prices.

It holds the config file's models and those managed live (``LiveModel``, brought by the
refresh loop from the database). A live model may have a price change ahead: the
registry keeps both prices and picks by the clock when a call resolves its model, so
the change takes effect at its instant on every worker, refreshed or not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from parley.domain.pricing import Price
from parley.domain.speech import SpeechProfile
from parley.domain.transcripts import TranscriptionAbilities
from parley.domain.value import value

CHAT_KINDS = frozenset({"chat"})
COMPLETION_KINDS = frozenset({"chat", "completion"})


@dataclass(frozen=True, slots=True)
class Cascade:
    """A ``kind: realtime`` model Parley speaks itself, from three models of its own
    (``api/cascade.py``): what hears, what answers, what speaks, and the voice."""

    transcription: str
    chat: str
    speech: str
    voice: str | None = None
    """The speech model's voice a session speaks with until it names another."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    name: str
    kind: str
    price: Price
    context_window: int | None = None
    vision: bool = False
    owned_by: str = "parley"
    aliases: tuple[str, ...] = ()
    retired_aliases: tuple[str, ...] = ()
    created: int = 0
    transcription: TranscriptionAbilities | None = None
    """Set for ``kind: transcription`` models."""
    speech: SpeechProfile | None = None
    """What a ``speech`` model allows (``None`` for other kinds)."""
    batch_price: Price | None = None
    """What a batch line costs (``None``: the same as ``price``)."""
    cascade: Cascade | None = None
    """Set for a realtime model built from parts (``None``: relayed to a channel)."""


def batch_priced(model: Resolved) -> Resolved:
    """The model as a batch line calls it: billed, and held against budgets, at its batch
    price."""
    spec = model.spec
    if spec.batch_price is None or spec.batch_price == spec.price:
        return model
    return Resolved(replace(spec, price=spec.batch_price), model.requested, model.deprecated)


@value
class Resolved:
    spec: ModelSpec
    requested: str
    deprecated: bool


@dataclass(frozen=True, slots=True)
class LiveModel:
    """A model managed live: ``spec`` at its price now and, when a change is scheduled,
    ``next_spec`` at the price it takes from ``next_from`` (Unix seconds) on."""

    spec: ModelSpec
    next_spec: ModelSpec | None = None
    next_from: float | None = None

    def at(self, now: float) -> ModelSpec:
        """The spec in force at ``now``."""
        if self.next_spec is not None and self.next_from is not None and now >= self.next_from:
            return self.next_spec
        return self.spec


class ModelRegistry:
    """Resolves any public name (or alias) to its model, without I/O."""

    def __init__(
        self,
        specs: Iterable[ModelSpec],
        capabilities: Mapping[str, str],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        """The call time's source (Unix seconds): which price of a live model applies."""
        self._configured = tuple(specs)
        self._live: tuple[LiveModel, ...] = ()
        self._switch_at: float | None = None
        self._build(clock())
        self._capabilities = {
            key: self._names[name].spec.name for key, name in capabilities.items()
        }

    def use_live(self, models: Sequence[LiveModel]) -> None:
        """Serve ``models`` beside the config file's from now on (the refresh found a
        change). A live model named like a configured one, or like a name taken
        before it, is left out: the config file and the first come win."""
        self._live = tuple(models)
        self._build(self.clock())

    def _build(self, now: float) -> None:
        specs = {spec.name: spec for spec in self._configured}
        names: dict[str, Resolved] = {}
        for spec in specs.values():
            _file(names, spec)
        switches = []
        for live in self._live:
            spec = live.at(now)
            if spec.name in specs or any(n in names for n in _names_of(spec)):
                continue
            specs[spec.name] = spec
            _file(names, spec)
            if live.next_from is not None and live.next_from > now:
                switches.append(live.next_from)
        self._specs, self._names = specs, names
        self._switch_at = min(switches, default=None)

    def resolve(self, name: str) -> Resolved | None:
        if self._switch_at is not None:
            self._catch_up()
        return self._names.get(name)

    def _catch_up(self) -> None:
        """Apply the price changes whose instant has come."""
        now = self.clock()
        if self._switch_at is not None and now >= self._switch_at:
            self._build(now)

    def is_configured(self, name: str) -> bool:
        """Whether ``name`` is a model, alias or retired alias of the config file."""
        return any(name in _names_of(spec) for spec in self._configured)

    def listed(self) -> list[ModelSpec]:
        """Models in the listing: every model, no aliases."""
        self._catch_up()
        return sorted(self._specs.values(), key=lambda spec: spec.name)

    def capabilities(self) -> dict[str, str]:
        return dict(self._capabilities)


def _names_of(spec: ModelSpec) -> tuple[str, ...]:
    return (spec.name, *spec.aliases, *spec.retired_aliases)


def _file(names: dict[str, Resolved], spec: ModelSpec) -> None:
    names[spec.name] = Resolved(spec, spec.name, deprecated=False)
    for alias in spec.aliases:
        names[alias] = Resolved(spec, alias, deprecated=False)
    for alias in spec.retired_aliases:
        names[alias] = Resolved(spec, alias, deprecated=True)
