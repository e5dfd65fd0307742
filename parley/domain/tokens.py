"""Token estimates, for reserving rate-limit tokens before the upstream counts for real,
and ceilings, for what a prompt can cost at most.

Parley ships no tokenizer (they download vocabularies at run time); an estimate of one
token per four characters, plus a few tokens of framing per message, is close enough for a
reservation that is settled with the upstream's own count afterwards.

A ceiling must hold whatever the text is (a hostile caller picks text that tokenizes
badly), so it counts bytes: every token a tokenizer makes covers at least one byte of
text, and everything an upstream reads of a request (messages, tool definitions, schemas)
is in its JSON body. What an upstream adds of its own (a chat template's framing, the
system prompt Anthropic adds for tool use) is allowed for by ``TEMPLATE_TOKENS``. An image
is the exception, counted at ``IMAGE_TOKENS_CEILING``.
"""

from __future__ import annotations

from typing import Any

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4
TOKENS_PER_IMAGE = 768
TEMPLATE_TOKENS = 1_024
"""Prompt tokens an upstream may add to any request of its own (a chat template, a
tool-use system prompt of a few hundred tokens): part of every prompt's ceiling."""
IMAGE_TOKENS_CEILING = 16_384
"""The most one image is taken to cost: the largest count engines give an image (Qwen2.5-VL
at its default pixel limit); OpenAI and Anthropic stay under 2,000."""


def estimate_text(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_messages(messages: list[Any]) -> int:
    """The prompt's tokens, estimated, for chat ``messages``."""
    return read_messages(messages)[0]


def read_messages(messages: list[Any]) -> tuple[int, int]:
    """The prompt's estimate for chat ``messages`` and the image parts in them, in one
    pass: a message whose content is a string (the common case) costs one lookup."""
    total = 3 + TOKENS_PER_MESSAGE * len(messages)
    images = 0
    for message in messages:
        if message.__class__ is not dict:
            continue
        content = message.get("content")
        if content.__class__ is str:
            total += (len(content) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
        elif content.__class__ is list:
            total += _estimate_content(content)
            images += _images(content)
    return total, images


def prompt_ceiling(body_bytes: int, images: int = 0) -> int:
    """The most prompt tokens a request body of ``body_bytes`` bytes with ``images`` images
    can cost (see the module docstring)."""
    return body_bytes + TEMPLATE_TOKENS + images * IMAGE_TOKENS_CEILING


def count_images(messages: list[Any]) -> int:
    """The image parts in chat messages."""
    return read_messages(messages)[1]


def _images(content: list[Any]) -> int:
    return sum(1 for part in content if part.__class__ is dict and part.get("type") == "image_url")


def estimate_prompt(prompt: Any) -> int:
    if isinstance(prompt, str):
        return estimate_text(prompt)
    if not isinstance(prompt, list):
        return 0
    total = 0
    for item in prompt:
        if isinstance(item, str):
            total += estimate_text(item)
        elif isinstance(item, int):
            total += 1
        elif isinstance(item, list):
            total += len(item)
    return total


def _estimate_content(content: Any) -> int:
    if isinstance(content, str):
        return estimate_text(content)
    if not isinstance(content, list):
        return 0
    total = 0
    for part in content:
        if part.__class__ is not dict:
            continue
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if text.__class__ is str:
                total += (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
        elif kind == "image_url":
            total += TOKENS_PER_IMAGE
    return total
