"""Each operation's allowance: the most a call may consume, known at admission."""

from __future__ import annotations

from typing import Any

import orjson

from parley.api.chat import parse_chat
from parley.api.completions import parse_completion
from parley.api.embeddings import EmbeddingJob, parse_embeddings
from parley.api.textgen import allowance
from parley.domain.models import ModelSpec, Resolved
from parley.domain.pricing import Price
from parley.domain.tokens import IMAGE_TOKENS_CEILING, TEMPLATE_TOKENS, estimate_prompt
from parley.domain.usage import Allowance
from parley.pipeline.admit import worst_cost
from parley.providers.registry import ProviderRegistry

DEFAULT_MAX_TOKENS = 1024


def model(window: int | None = None) -> Resolved:
    return Resolved(ModelSpec("m", "chat", Price(), context_window=window), "m", False)


def chat(**fields: Any) -> tuple[Any, int]:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    raw = orjson.dumps(body)
    return parse_chat(body, len(raw)), len(raw)


def test_a_chat_call_may_use_its_body_and_max_tokens() -> None:
    text, size = chat(max_tokens=10)
    assert allowance(text, model(), DEFAULT_MAX_TOKENS) == Allowance(size + TEMPLATE_TOKENS, 10)


def test_without_max_tokens_the_context_window_bounds_the_reply() -> None:
    text, size = chat()
    held = allowance(text, model(8192), DEFAULT_MAX_TOKENS)
    assert held == Allowance(size + TEMPLATE_TOKENS, 8192)


def test_the_context_window_bounds_both_sides() -> None:
    text, _ = chat(max_tokens=100_000, messages=[{"role": "user", "content": "x" * 9000}])
    assert allowance(text, model(8192), DEFAULT_MAX_TOKENS) == Allowance(8192, 8192)


def test_every_reply_the_upstream_writes_counts() -> None:
    text, size = chat(max_tokens=10, n=4)
    assert allowance(text, model(), DEFAULT_MAX_TOKENS) == Allowance(size + TEMPLATE_TOKENS, 40)


def test_with_no_bound_the_reply_is_open_ended() -> None:
    text, size = chat()
    held = allowance(text, model(), DEFAULT_MAX_TOKENS)
    assert held == Allowance(size + TEMPLATE_TOKENS, DEFAULT_MAX_TOKENS, open_ended=True)


def test_an_image_counts_at_its_ceiling() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    text, size = chat(messages=[{"role": "user", "content": [image, image]}], max_tokens=1)
    held = allowance(text, model(), DEFAULT_MAX_TOKENS)
    assert held.prompt_tokens == size + TEMPLATE_TOKENS + 2 * IMAGE_TOKENS_CEILING


def test_text_that_tokenizes_badly_stays_within_its_bytes() -> None:
    # 1,000 emoji: an estimate of 250-odd tokens; a tokenizer may make 4,000 (one a byte)
    text, _ = chat(messages=[{"role": "user", "content": "\U0001f600" * 1000}])
    assert text.prompt_estimate < 1000
    assert allowance(text, model(), 1).prompt_tokens >= 4000


def test_a_completion_call_may_use_its_body_and_best_of() -> None:
    body = {"model": "m", "prompt": "hello", "max_tokens": 5, "best_of": 3}
    size = len(orjson.dumps(body))
    text = parse_completion(body, size)
    assert allowance(text, model(), DEFAULT_MAX_TOKENS) == Allowance(size + TEMPLATE_TOKENS, 15)


def test_an_embeddings_call_may_use_its_body() -> None:
    body = {"model": "m", "input": ["a", "b"]}
    size = len(orjson.dumps(body))
    job = EmbeddingJob(
        parse_embeddings(body), ProviderRegistry(), size, estimate_prompt(["a", "b"])
    )
    assert job.allowance(model()) == Allowance(prompt_tokens=size + TEMPLATE_TOKENS)


def test_the_worst_cost_is_the_allowance_at_the_models_prices() -> None:
    price = Price(input_per_1k=1000, output_per_1k=3000, per_1k_characters=0, per_minute=60)
    held = Allowance(prompt_tokens=2, completion_tokens=4, audio_ms=1000)
    assert worst_cost(price, held) == 2 + 12 + 1
