"""OpenAI's embeddings call as Vertex AI's text-embedding ``predict``, and its reply back.

Vertex's embedding models (``gemini-embedding-001``, ``text-embedding-005``,
``text-multilingual-embedding-002``...) take ``{"instances": [{"content", "task_type"?}],
"parameters": {"outputDimensionality"?, "autoTruncate"?}}`` at
``publishers/google/models/{model}:predict`` and answer ``{"predictions": [{"embeddings":
{"values", "statistics": {"token_count", "truncated"}}}]}``, one prediction per instance,
in order. OpenAI's ``dimensions`` is ``outputDimensionality``; ``task_type`` (Vertex's
``RETRIEVAL_QUERY``, ``SEMANTIC_SIMILARITY``...) and ``auto_truncate`` are optional fields
beyond OpenAI's, passed on when a caller sends them. The reply is OpenAI's ``list`` with
``usage.prompt_tokens`` the sum of the predictions' token counts, so the call is billed
by what Vertex counted (Parley's estimate only when a count is missing).

``gemini-embedding-001`` takes one instance a call, the others up to ``MAX_INSTANCES``:
``batches`` cuts the texts so.
"""

from __future__ import annotations

from typing import Any

from parley.domain.wire import JSON
from parley.errors import InvalidRequest

MAX_INSTANCES = 250
SINGLE_INSTANCE_PREFIX = "gemini-embedding"
"""Models named so embed one text per ``predict`` call."""


def texts_of(body: JSON) -> list[str]:
    """The body's ``input`` as texts; token ids have no Vertex form (a 400)."""
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise InvalidRequest(
            "This model's upstream embeds text: 'input' must be a string or an array of strings.",
            param="input",
        )
    return texts


def batches(model: str, texts: list[str]) -> list[list[str]]:
    """The texts cut into the ``predict`` calls the model takes, in order."""
    size = 1 if model.startswith(SINGLE_INSTANCE_PREFIX) else MAX_INSTANCES
    return [texts[start : start + size] for start in range(0, len(texts), size)]


def predict_request(texts: list[str], body: JSON) -> JSON:
    """A ``predict`` body for ``texts``, with the caller's options."""
    task_type = _optional(body, "task_type", str)
    instances: list[JSON] = []
    for text in texts:
        instance: JSON = {"content": text}
        if task_type is not None:
            instance["task_type"] = task_type
        instances.append(instance)
    parameters: JSON = {}
    dimensions = body.get("dimensions")
    if isinstance(dimensions, int):
        parameters["outputDimensionality"] = dimensions
    truncate = _optional(body, "auto_truncate", bool)
    if truncate is not None:
        parameters["autoTruncate"] = truncate
    payload: JSON = {"instances": instances}
    if parameters:
        payload["parameters"] = parameters
    return payload


def _optional(body: JSON, name: str, kind: type) -> Any:
    value = body.get(name)
    if value is not None and not isinstance(value, kind):
        raise InvalidRequest(f"'{name}' must be a {kind.__name__}.", param=name)
    return value


def read_predictions(reply: JSON) -> tuple[list[list[float]], int | None] | None:
    """The vectors of a ``predict`` reply, in order, and the tokens Vertex counted
    (``None`` when a prediction gives no count); ``None`` when the reply is malformed."""
    predictions = reply.get("predictions")
    if not isinstance(predictions, list):
        return None
    vectors: list[list[float]] = []
    tokens: int | None = 0
    for prediction in predictions:
        embeddings = prediction.get("embeddings") if isinstance(prediction, dict) else None
        values = embeddings.get("values") if isinstance(embeddings, dict) else None
        if not isinstance(values, list):
            return None
        vectors.append(values)
        statistics = embeddings.get("statistics") if isinstance(embeddings, dict) else None
        count = statistics.get("token_count") if isinstance(statistics, dict) else None
        # The REST reply may write a count as a float (a protobuf Value): 7.0 is 7.
        if isinstance(count, float) and count.is_integer():
            count = int(count)
        if tokens is not None and type(count) is int and count >= 0:
            tokens += count
        else:
            tokens = None
    return vectors, tokens
