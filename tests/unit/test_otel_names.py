"""The GenAI conventions' names Parley gives its endpoints and channel types
(``parley/telemetry/otel.py``)."""

from __future__ import annotations

import pytest

from parley.telemetry.otel import operation_name, provider_name


@pytest.mark.parametrize(
    ("endpoint", "name"),
    [
        ("/v1/chat/completions", "chat"),
        ("/v1/messages", "chat"),
        ("/v1/responses", "chat"),
        ("/v1/completions", "text_completion"),
        ("/v1/embeddings", "embeddings"),
        ("/v1/audio/speech", "audio.speech"),
        ("/v1/rerank", "rerank"),
    ],
)
def test_each_endpoint_has_its_operation_name(endpoint: str, name: str) -> None:
    assert operation_name(endpoint) == name


@pytest.mark.parametrize(
    ("channel_type", "name"),
    [
        ("openai", "openai"),
        ("azure-openai", "azure.ai.openai"),
        ("bedrock", "aws.bedrock"),
        ("vertex", "gcp.vertex_ai"),
        ("gemini", "gcp.gemini"),
        ("deepgram", "deepgram"),
    ],
)
def test_each_channel_type_has_its_provider_name(channel_type: str, name: str) -> None:
    assert provider_name(channel_type) == name
