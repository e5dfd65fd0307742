"""Reading a model's voice catalogue file (YAML), once at start-up.

The format (docs/audio.md)::

    voices:
      - id: vivian              # the engine's voice id (required)
        label: Vivian           # display name in its own language (required)
        lang: en                # the language it was curated for
        label_en: Vivian        # English display name (defaults to label)
        gender: F               # M or F
        age: young              # young, adult or mature
        category: audiobooks    # curated use case
        tags: [warm, calm, clear, bright, friendly]   # exactly five
        description: ...
        description_en: ...

A relative path is read from the working directory. A problem is a ``ConfigError``
naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from parley.domain.voices import Catalogue, CatalogueEntry
from parley.settings import ConfigError


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    label: str = Field(min_length=1)
    lang: str | None = None
    label_en: str | None = None
    gender: Literal["M", "F"] | None = None
    age: Literal["young", "adult", "mature"] | None = None
    category: str | None = None
    tags: tuple[str, ...] | None = Field(None, min_length=5, max_length=5)
    description: str | None = None
    description_en: str | None = None


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    voices: tuple[_Entry, ...] = ()


def load_catalogue(path: str | None) -> Catalogue:
    if path is None:
        return Catalogue()
    import yaml  # only with a catalogue file configured

    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read voice catalogue ({error.strerror})") from None
    except yaml.YAMLError:
        raise ConfigError(f"{path}: the voice catalogue is not valid YAML") from None
    try:
        parsed = _File.model_validate(raw or {})
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ConfigError(f"{path}: {where}: {problem['msg']}") from None
    entries = {entry.id: _entry(entry) for entry in parsed.voices}
    if len(entries) != len(parsed.voices):
        raise ConfigError(f"{path}: a voice id is listed twice")
    return Catalogue(entries)


def _entry(entry: _Entry) -> CatalogueEntry:
    return CatalogueEntry(
        id=entry.id,
        label=entry.label,
        lang=entry.lang,
        label_en=entry.label_en,
        gender=entry.gender,
        age=entry.age,
        category=entry.category,
        tags=entry.tags or (),
        description=entry.description,
        description_en=entry.description_en,
    )
