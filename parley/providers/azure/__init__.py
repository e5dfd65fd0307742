"""Azure OpenAI (``type: azure-openai``): OpenAI's wire format at Azure's URLs, served
by the OpenAI adapter with ``AzureEndpoint``."""

from parley.providers.azure.endpoint import AzureEndpoint

__all__ = ["AzureEndpoint"]
