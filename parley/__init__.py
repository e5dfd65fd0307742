"""Parley: an OpenAI-compatible AI gateway."""

__version__ = "0.1.0"
