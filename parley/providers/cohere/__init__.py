"""Cohere's API: rerank (v2)."""

from parley.providers.cohere.adapter import CohereRerank

__all__ = ["CohereRerank"]
