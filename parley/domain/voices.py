"""Voices: clone identity, the curated catalogue, and the voice records callers see.

The engine owns audio and clones; Parley owns identity and privacy. A clone's id is
``g<group id>__<label>``; the label is 1 to 48 characters of ASCII letters, digits, ``_``
and ``-``, starting with a letter or digit. Engines lower-case names (vLLM-Omni), so two
labels differing only in case are the same voice: the second is a 409.

An id is clone-shaped when its ``folded`` form starts with ``g<digits>__``: the shape is
judged on what an engine that folds case or Unicode compatibility forms could make of
the id, never on its spelling, so ``G1__X``, ``g1__x`` in fullwidth letters and ``g1__x``
are all group 1's. A clone-shaped id is only ever the caller's own registered clone; any
other is treated as a voice that does not exist, whether or not the engine's roster can
be read.

The voice list is the engine's built-in roster merged with the model's catalogue by id,
plus the caller's group's clones. Coverage follows the spec: catalogued (curated) voices
carry the metadata; an uncatalogued built-in has ``lang: null`` and no ``lang_key``;
clones carry only ``id``, ``label``, ``builtin`` and possibly ``status``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}")
CLONE_SHAPE = re.compile(r"g(\d+)__")
DROPPED_CATEGORIES = frozenset({"Mn", "Me", "Cf", "Cc", "Zs", "Zl", "Zp"})
"""Combining marks, format and control characters and spaces: what folding drops."""
MAX_GROUP_DIGITS = 18
MAX_VOICE_ID_CHARS = 256
"""Longer than any voice id: such an id is not folded (its cost grows with its length)."""
LABEL_RULE = (
    "1 to 48 characters of ASCII letters, digits, '_' and '-', starting with a letter or digit"
)
READY = "ready"


def valid_label(label: str) -> bool:
    return LABEL.fullmatch(label) is not None


def clone_id(group_id: int, label: str) -> str:
    return f"g{group_id}__{label}"


def folded(voice_id: str) -> str:
    """The id as engines may read it: NFKC, case-folded, decomposed with its marks, format
    characters and spaces dropped, NFKC again. It covers lower-casing, ``casefold`` and
    compatibility forms (fullwidth letters, the long s, the Kelvin sign, dotted capital I), so
    ids an engine may take for one voice fold alike; a clone id folds to its lower case."""
    wide = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", voice_id).casefold())
    kept = "".join(ch for ch in wide if unicodedata.category(ch) not in DROPPED_CATEGORIES)
    return unicodedata.normalize("NFKC", kept).casefold()


def clone_owner(voice_id: str) -> int | None:
    """The group a clone-shaped id names, or ``None`` for an id no folding makes one.
    A group number longer than any group's is 0, which names no group; so is any id
    longer than ``MAX_VOICE_ID_CHARS``, so that it never reaches an engine."""
    if len(voice_id) > MAX_VOICE_ID_CHARS:
        return 0
    match = CLONE_SHAPE.match(folded(voice_id))
    if match is None:
        return None
    digits = match.group(1)
    return int(digits) if len(digits) <= MAX_GROUP_DIGITS else 0


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    """One curated voice: display data merged into the engine's roster by ``id``."""

    id: str
    label: str
    lang: str | None = None
    label_en: str | None = None
    gender: str | None = None
    age: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    description: str | None = None
    description_en: str | None = None

    def record(self, *, ready: bool) -> dict[str, Any]:
        record: dict[str, Any] = {"id": self.id, "label": self.label, "builtin": True}
        if ready:
            record["status"] = READY
        record["lang"] = self.lang
        if self.lang is not None:
            record["lang_key"] = self.lang
        record["label_en"] = self.label_en or self.label
        for name in ("gender", "age", "category"):
            value = getattr(self, name)
            if value is not None:
                record[name] = value
        if self.category is not None:
            record["categories"] = [self.category]
        if self.tags:
            record["tags"] = list(self.tags)
        for name in ("description", "description_en"):
            value = getattr(self, name)
            if value is not None:
                record[name] = value
        return record


@dataclass(frozen=True, slots=True)
class Catalogue:
    entries: Mapping[str, CatalogueEntry] = field(default_factory=dict)

    def get(self, voice_id: str) -> CatalogueEntry | None:
        return self.entries.get(voice_id)

    def lang(self, voice_id: str) -> str | None:
        entry = self.entries.get(voice_id)
        return entry.lang if entry is not None else None


@dataclass(frozen=True, slots=True)
class Clone:
    """A voice a group cloned, as Parley's registry keeps it."""

    group_id: int
    model: str
    label: str
    voice_id: str
    engine_name: str
    channel: str
    duration_ms: int
    created_at: datetime
    transcript: str | None = None
    consent: str | None = None
    """What the caller sent as the speaker's consent (OpenAI's consent recording id)."""

    def record(self, *, ready: bool) -> dict[str, Any]:
        record: dict[str, Any] = {"id": self.voice_id, "label": self.label, "builtin": False}
        if ready:
            record["status"] = READY
        return record


@dataclass(frozen=True, slots=True)
class PendingDeletion:
    """A clone deleted in Parley whose copy on its engine is not known to be gone yet.

    The clone itself is out of the registry (no caller lists or uses it again); this row
    is what is left to do: delete ``engine_name`` on ``channel``. ``next_attempt_at`` is
    when an attempt may start; an attempt under way holds it a while ahead (its claim),
    so that no other worker or instance starts one at the same time."""

    group_id: int
    model: str
    label: str
    voice_id: str
    engine_name: str
    channel: str
    requested_at: datetime
    next_attempt_at: datetime
    attempts: int = 0
    """Failed attempts so far."""
    last_error: str | None = None
    """The last failure, with every credential removed."""
    last_attempt_at: datetime | None = None
    id: int = 0
    """The row's number (0 before it is stored): a voice id may be deleted, cloned
    again and deleted again, each deletion a row of its own."""


@dataclass(frozen=True, slots=True)
class Deleted:
    """A clone just deleted in Parley, and its deletion on the engine when that is still
    to do (``None``: the engine no longer holds the voice)."""

    clone: Clone
    pending: PendingDeletion | None


def deletion_delay(attempts: int, first: float, longest: float) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt at deleting a clone on its
    engine: ``first``, doubled after each further failure, never more than ``longest``."""
    if attempts <= 1:
        return min(first, longest)
    doublings = min(attempts - 1, 62)  # past it the cap has long been reached
    return min(first * 2.0**doublings, longest)


def voice_records(
    builtin: Iterable[str],
    clones: Iterable[Clone],
    catalogue: Catalogue,
    *,
    status_on_every_voice: bool,
) -> list[dict[str, Any]]:
    """The voice list: built-in voices (catalogued or not) then the group's clones. A
    clone-shaped id in the engine's roster is some group's clone, never a built-in."""
    records: list[dict[str, Any]] = []
    for voice_id in builtin:
        if clone_owner(voice_id) is not None:
            continue
        entry = catalogue.get(voice_id)
        if entry is not None:
            records.append(entry.record(ready=True))
            continue
        record: dict[str, Any] = {"id": voice_id, "label": voice_id, "builtin": True}
        if status_on_every_voice:
            record["status"] = READY
        record["lang"] = None
        records.append(record)
    records.extend(clone.record(ready=status_on_every_voice) for clone in clones)
    return records
