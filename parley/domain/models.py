"""The model registry: public names, aliases, retired aliases, kinds and prices."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from parley.domain.pricing import Price
from parley.domain.speech import SpeechProfile
from parley.domain.transcripts import TranscriptionAbilities
from parley.domain.value import value

CHAT_KINDS = frozenset({"chat"})
COMPLETION_KINDS = frozenset({"chat", "completion"})


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


class ModelRegistry:
    """Resolves any public name (or alias) to its model, without I/O."""

    def __init__(self, specs: Iterable[ModelSpec], capabilities: Mapping[str, str]) -> None:
        self._specs = {spec.name: spec for spec in specs}
        self._names: dict[str, Resolved] = {}
        for spec in self._specs.values():
            self._names[spec.name] = Resolved(spec, spec.name, deprecated=False)
            for alias in spec.aliases:
                self._names[alias] = Resolved(spec, alias, deprecated=False)
            for alias in spec.retired_aliases:
                self._names[alias] = Resolved(spec, alias, deprecated=True)
        self._capabilities = {
            key: self._names[name].spec.name for key, name in capabilities.items()
        }

    def resolve(self, name: str) -> Resolved | None:
        return self._names.get(name)

    def listed(self) -> list[ModelSpec]:
        """Models in the listing: every model, no aliases."""
        return sorted(self._specs.values(), key=lambda spec: spec.name)

    def capabilities(self) -> dict[str, str]:
        return dict(self._capabilities)
