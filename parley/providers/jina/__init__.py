"""Jina's rerank dialect, which vLLM, llama.cpp and Infinity serve too."""

from parley.providers.jina.adapter import JinaRerank

__all__ = ["JinaRerank"]
