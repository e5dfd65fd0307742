"""The adapter for OpenAI's wire format, spoken by OpenAI and by vLLM, Ollama, llama.cpp..."""

from parley.providers.openai.adapter import OpenAIAdapter

__all__ = ["OpenAIAdapter"]
