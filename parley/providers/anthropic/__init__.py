"""The adapter for Anthropic's Messages API: OpenAI callers translated, Messages callers
passed through."""

from parley.providers.anthropic.adapter import AnthropicAdapter

__all__ = ["AnthropicAdapter"]
