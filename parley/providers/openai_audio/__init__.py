"""The adapter for OpenAI-style speech engines: vLLM-Omni, OpenAI, Kokoro-FastAPI, speaches."""

from parley.providers.openai_audio.adapter import OpenAIAudioAdapter

__all__ = ["OpenAIAudioAdapter"]
