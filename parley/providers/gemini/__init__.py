"""The adapter for Google's ``generateContent`` wire format (the Gemini API, and Vertex
AI's Gemini models)."""

from parley.providers.gemini.adapter import ApiKeyEndpoint, Endpoint, GeminiAdapter

__all__ = ["ApiKeyEndpoint", "Endpoint", "GeminiAdapter"]
