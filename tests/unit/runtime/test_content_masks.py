"""The ``redacted`` content policy's masks: personal data and secrets are masked, each by
a mark naming it, and the ordinary text around them (dates, versions, order numbers
that fail the Luhn check) is left as it was."""

from __future__ import annotations

import orjson
import pytest

from parley.runtime.content_masks import luhn, masked

MASKED = [
    ("write to jane.doe+work@mail.example.co.uk today", "write to [email] today"),
    ("visa 4111 1111 1111 1111.", "visa [card]."),
    ("amex 3782-822463-10005", "amex [card]"),
    ("card 5555555555554444 on file", "card [card] on file"),
    ("ssn 078-05-1120", "ssn [ssn]"),
    ("pay DE89 3704 0044 0532 0130 00 now", "pay [iban] now"),
    ("call +1 415 555 0132", "call [phone]"),
    ("call +44 (20) 7946-0958!", "call [phone]!"),
    ("or (415) 555-0132", "or [phone]"),
    ("or 415-555-0132", "or [phone]"),
    ("or 415.555.0132", "or [phone]"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "aws [secret] here"),
    ("gh ghp_" + "A1b2" * 9, "gh [secret]"),
    ("pat github_pat_" + "x" * 50, "pat [secret]"),
    ("lab glpat-abcdefghij0123456789", "lab [secret]"),
    ("slack xoxb-1234567890-abcdefghij", "slack [secret]"),
    ("stripe sk_live_51HxYzAbCdEfGh", "stripe [secret]"),
    ("google AIza" + "S" * 35, "google [secret]"),
    ("hf hf_" + "q" * 34, "hf [secret]"),
    ("openai sk-proj-abcdefghijklmnopqrstuvwx", "openai [redacted]"),
    ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: [redacted]"),
    ('{"x-api-key": "k-123456789"}', '{"x-api-key": "[redacted]"}'),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig", "jwt [redacted]"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\\nMIIEow\\nIBAAK\\n-----END RSA PRIVATE KEY-----",
        "[secret]",
    ),
]
LEFT = [
    "the meeting is on 2026-11-29 at 10:30",
    "version 1.2.3.4 of the library",
    "order 4111 1111 1111 1112 failed",  # fails the Luhn check: not a card
    "it costs 12,345.67 dollars",
    "an id of 1234567890123456789012345",
    "plus +12 points",
    "room 101-2",
]


@pytest.mark.parametrize(("text", "expected"), MASKED)
def test_personal_data_and_secrets_are_masked(text: str, expected: str) -> None:
    assert masked(text) == expected


@pytest.mark.parametrize("text", LEFT)
def test_ordinary_text_is_left_as_it_was(text: str) -> None:
    assert masked(text) == text


def test_luhn() -> None:
    assert luhn("4111111111111111") and luhn("79927398713")
    assert not luhn("4111111111111112") and not luhn("79927398710")


def test_masks_hold_inside_json_and_keep_it_valid() -> None:
    body = orjson.dumps(
        {"messages": [{"role": "user", "content": "mail a@b.io, card 4242424242424242"}]}
    ).decode()
    parsed = orjson.loads(masked(body))
    assert parsed["messages"][0]["content"] == "mail [email], card [card]"
