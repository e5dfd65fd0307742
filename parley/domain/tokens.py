"""Token estimates, for reserving rate-limit tokens before the upstream counts for real.

Parley ships no tokenizer (they download vocabularies at run time); an estimate of one
token per four characters, plus a few tokens of framing per message, is close enough for a
reservation that is settled with the upstream's own count afterwards.
"""

from __future__ import annotations

from typing import Any

CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4
TOKENS_PER_IMAGE = 768


def estimate_text(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_messages(messages: list[Any]) -> int:
    total = 3
    for message in messages:
        total += TOKENS_PER_MESSAGE
        if isinstance(message, dict):
            total += _estimate_content(message.get("content"))
    return total


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
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            total += estimate_text(part["text"])
        elif part.get("type") == "image_url":
            total += TOKENS_PER_IMAGE
    return total
