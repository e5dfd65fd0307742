"""The clone registry in memory, so a speech call never waits on the database for a voice.

Filled from the store at start-up and refreshed with the key directory; a clone this
instance creates or deletes counts at once (a deleted clone is retired: its engine copy
is then deleted by ``voices/deletions.py``). A clone id of the caller's own group that the
book does not know (created on another instance since the last refresh) is looked up in
the store once; an id still unknown there is remembered as unknown until the next refresh.

Clones are keyed by model and folded voice id (``domain.voices.folded``): engines fold
names, so ``Anna``, ``anna`` and ``ANNA`` in fullwidth letters are one voice. The
engines' own names for the clones are known too (``is_engine_name``), so that a hosted
engine's voice id of a clone (ElevenLabs', Cartesia's), were it ever learnt, is never
taken for a voice of the engine's own.
"""

from __future__ import annotations

from datetime import datetime

from parley.domain.voices import Clone, PendingDeletion, folded
from parley.store.base import VoiceStore

Key = tuple[str, str]


def _key(model: str, voice_id: str) -> Key:
    return model, folded(voice_id)


class CloneBook:
    def __init__(self, store: VoiceStore) -> None:
        self._store = store
        self._clones: dict[Key, Clone] = {}
        self._unknown: set[Key] = set()
        self._changes = 0
        self._local: dict[Key, tuple[int, Clone | None]] = {}
        """What this instance changed, with its change number: kept over a load that
        started before it."""
        self._engine_names: dict[str, frozenset[str]] | None = None
        """Each model's clones' engine names; rebuilt after a change."""

    async def load(self) -> None:
        seen = self._changes
        clones = await self._store.list_clones()
        fresh = {_key(c.model, c.voice_id): c for c in clones}
        for key, (change, clone) in self._local.items():
            if change > seen:
                if clone is None:
                    fresh.pop(key, None)
                else:
                    fresh[key] = clone
        self._clones = fresh
        self._engine_names = None
        self._unknown.clear()
        self._local = {key: entry for key, entry in self._local.items() if entry[0] > seen}

    def of_group(self, model: str, group_id: int) -> list[Clone]:
        found = [c for c in self._clones.values() if c.model == model and c.group_id == group_id]
        return sorted(found, key=lambda clone: clone.created_at)

    def is_engine_name(self, model: str, name: str) -> bool:
        """Whether ``name`` is the engine's name for one of the model's clones (any
        group's)."""
        if self._engine_names is None:
            names: dict[str, set[str]] = {}
            for clone in self._clones.values():
                names.setdefault(clone.model, set()).add(clone.engine_name)
            self._engine_names = {model: frozenset(held) for model, held in names.items()}
        return name in self._engine_names.get(model, frozenset())

    def get(self, model: str, voice_id: str) -> Clone | None:
        return self._clones.get(_key(model, voice_id))

    async def find(self, model: str, voice_id: str, group_id: int) -> Clone | None:
        """The group's clone with this id, from memory, else once from the store."""
        key = _key(model, voice_id)
        clone = self._clones.get(key)
        if clone is not None or key in self._unknown:
            return clone if clone is not None and clone.group_id == group_id else None
        stored = await self._store.list_clones(model=model, group_id=group_id)
        for candidate in stored:
            self._clones.setdefault(_key(candidate.model, candidate.voice_id), candidate)
        clone = self._clones.get(key)
        if clone is None:
            self._unknown.add(key)
        return clone if clone is not None and clone.group_id == group_id else None

    async def add(self, clone: Clone) -> Clone:
        """Record a new clone; ``Conflict`` when its id is taken."""
        await self._store.add_clone(clone)
        self._remember(_key(clone.model, clone.voice_id), clone)
        return clone

    async def retire(
        self, clone: Clone, requested_at: datetime, claimed_until: datetime
    ) -> PendingDeletion | None:
        """Forget the clone here and in the store, where its engine copy is recorded as
        still to delete (``voices/deletions.py``); ``None`` when the store no longer had
        it (deleted meanwhile by another request: forgotten here all the same)."""
        pending = await self._store.retire_clone(clone, requested_at, claimed_until)
        self._remember(_key(clone.model, clone.voice_id), None)
        return pending

    async def deletion_pending(self, model: str, voice_id: str, group_id: int) -> bool:
        """Whether a deleted clone of the group with this id (in any spelling the
        engines fold alike) is still to delete on its engine: until it is, the id is not
        cloned again, so that the engine never holds two voices of one id (and the late
        deletion of the old one never takes the new one)."""
        wanted = folded(voice_id)
        pending = await self._store.list_deletions(model=model, group_id=group_id)
        return any(folded(deletion.voice_id) == wanted for deletion in pending)

    def _remember(self, key: Key, clone: Clone | None) -> None:
        self._changes += 1
        self._engine_names = None
        self._local[key] = (self._changes, clone)
        self._unknown.discard(key)
        if clone is None:
            self._clones.pop(key, None)
        else:
            self._clones[key] = clone
