"""The adapter for Deepgram: ``listen`` (files and the live WebSocket) and Aura's ``speak``."""

from parley.providers.deepgram.adapter import DeepgramAdapter

__all__ = ["DeepgramAdapter"]
