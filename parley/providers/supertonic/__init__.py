"""The adapter for Supertone's Supertonic server (``supertonic serve``)."""

from parley.providers.supertonic.adapter import SupertonicAdapter

__all__ = ["SupertonicAdapter"]
