"""Cartesia: speech (bytes and SSE), voices and cloning from a clip."""

from parley.providers.cartesia.adapter import CartesiaAdapter

__all__ = ["CartesiaAdapter"]
