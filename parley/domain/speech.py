"""A speech model's profile (what its options allow) and the rules of a speech call.

Formats: ``wav`` (the default), ``mp3`` and ``pcm`` (16-bit little-endian mono at the
model's ``sample_rate``) are served; ``opus``, ``aac`` and ``flac`` fall back to WAV on a
model whose ``unsupported_formats`` is ``wav`` (the fast model) and are a 400 elsewhere.

Rate limits: speech counts against the token budget at ``CHARACTERS_PER_TOKEN``
characters a token (rounded up), reserved before the call and never settled up or down:
the input's length is known exactly before the engine is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from parley.domain.voices import Catalogue

SERVED_FORMATS = frozenset({"wav", "mp3", "pcm"})
FALLBACK_FORMATS = frozenset({"opus", "aac", "flac"})
MEDIA_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg", "pcm": "audio/pcm"}
CHARACTERS_PER_TOKEN = 4
MIN_CLIP_SECONDS = 3.0
MAX_CLIP_SECONDS = 60.0


def character_tokens(characters: int) -> int:
    """The tokens ``characters`` of speech input count as against rate limits."""
    return (characters + CHARACTERS_PER_TOKEN - 1) // CHARACTERS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class SpeechProfile:
    """What a speech model allows, from its ``audio`` options and catalogue."""

    catalogue: Catalogue = field(default_factory=Catalogue)
    default_voice: str | None = None
    fallback_to_wav: bool = False
    quality_steps: Mapping[str, int] = field(default_factory=dict)
    default_quality: str | None = None
    instruction: bool = False
    cloning: bool = False
    transcript_cloning: bool = False
    voice_listing: bool = True
    status_on_every_voice: bool = False
    max_input_chars: int = 4096
    sample_rate: int = 24000
    max_clip_bytes: int = 10_485_760
    engine_clip_seconds: float | None = 30.0

    def options(self) -> dict[str, object]:
        """The options as ``/v1/models`` and ``/v1/capabilities`` show them."""
        return {
            "formats": sorted(SERVED_FORMATS),
            "unsupported_formats": "wav" if self.fallback_to_wav else "reject",
            "quality": sorted(self.quality_steps),
            "instruction": self.instruction,
            "voices": self.voice_listing,
            "cloning": self.cloning,
            "transcript_cloning": self.transcript_cloning,
            "max_input_chars": self.max_input_chars,
            "pcm_sample_rate": self.sample_rate,
            "streaming": ["audio", "sse"],
        }
