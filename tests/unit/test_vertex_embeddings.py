"""Vertex AI's text-embeddings ``predict``: what OpenAI's embeddings call becomes, and
how a reply is read (``parley/providers/vertex/embeddings.py``)."""

from __future__ import annotations

import pytest

from parley.errors import InvalidRequest
from parley.providers.vertex.embeddings import (
    batches,
    predict_request,
    read_predictions,
    texts_of,
)


def test_gemini_embedding_models_take_one_text_a_call_others_250() -> None:
    texts = [str(n) for n in range(501)]
    assert batches("gemini-embedding-001", texts[:3]) == [["0"], ["1"], ["2"]]
    assert [len(batch) for batch in batches("text-embedding-005", texts)] == [250, 250, 1]
    assert [text for batch in batches("text-embedding-005", texts) for text in batch] == texts


def test_the_callers_options_become_vertex_fields() -> None:
    body = {"input": "x", "dimensions": 8, "task_type": "CLUSTERING", "auto_truncate": False}
    assert predict_request(["a", "b"], body) == {
        "instances": [
            {"content": "a", "task_type": "CLUSTERING"},
            {"content": "b", "task_type": "CLUSTERING"},
        ],
        "parameters": {"outputDimensionality": 8, "autoTruncate": False},
    }
    assert predict_request(["a"], {"input": "a"}) == {"instances": [{"content": "a"}]}
    with pytest.raises(InvalidRequest) as refused:
        predict_request(["a"], {"task_type": 3})
    assert refused.value.param == "task_type"
    with pytest.raises(InvalidRequest):
        texts_of({"input": [[1, 2]]})


def test_token_counts_are_summed_and_a_missing_one_leaves_no_count() -> None:
    def prediction(count: object) -> dict[str, object]:
        return {"embeddings": {"values": [0.5], "statistics": {"token_count": count}}}

    assert read_predictions({"predictions": [prediction(2), prediction(3.0)]}) == (
        [[0.5], [0.5]],
        5,
    )
    assert read_predictions({"predictions": [prediction(2), prediction(None)]}) == (
        [[0.5], [0.5]],
        None,
    )
    assert read_predictions({"predictions": [prediction(-1)]}) == ([[0.5]], None)
    assert read_predictions({"predictions": [{"embeddings": {}}]}) is None
    assert read_predictions({"error": "no"}) is None
