"""Hugging Face Text Embeddings Inference: rerank."""

from parley.providers.tei.adapter import TEIRerank

__all__ = ["TEIRerank"]
