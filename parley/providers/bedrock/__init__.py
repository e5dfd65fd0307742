"""Amazon Bedrock (``type: bedrock``): the Converse API, and rerank through InvokeModel,
signed with SigV4."""

from parley.providers.bedrock.adapter import BedrockAdapter
from parley.providers.bedrock.rerank import BedrockRerank

__all__ = ["BedrockAdapter", "BedrockRerank"]
