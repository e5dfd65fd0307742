"""ElevenLabs: speech, voices (instant voice cloning) and Scribe transcription."""

from parley.providers.elevenlabs.adapter import ElevenLabsAdapter

__all__ = ["ElevenLabsAdapter"]
