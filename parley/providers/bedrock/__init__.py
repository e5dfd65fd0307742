"""Amazon Bedrock (``type: bedrock``): the Converse API, signed with SigV4."""

from parley.providers.bedrock.adapter import BedrockAdapter

__all__ = ["BedrockAdapter"]
