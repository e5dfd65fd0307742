"""Masking what a ``redacted`` content policy must not keep: personal data and secrets.

Masked, each by a mark naming what stood there:

* secrets (``[secret]``): PEM private keys, AWS access key ids, GitHub, GitLab, Slack,
  Stripe, Google and Hugging Face tokens; then everything ``providers/redaction.py``
  takes out of upstream errors (``[redacted]``): ``Authorization``-style header values,
  bearer tokens, ``sk-`` keys, JWTs;
* email addresses (``[email]``);
* card numbers (``[card]``): 13 to 19 digits, spaces or dashes between, that pass the
  Luhn check (a run that fails it is left: an order number is not a card);
* US social security numbers (``[ssn]``) and IBANs (``[iban]``);
* phone numbers (``[phone]``): an international number (``+`` and 8 to 15 digits), or a
  North American one (``(555) 123-4567``, ``555-123-4567``, ``555.123.4567``).

The masks run in that order, so a card number is never half-taken for a phone number.
Each pattern is linear in the text; the text is already capped (``content.max_bytes``).
"""

from __future__ import annotations

import re

from parley.providers.redaction import redact

SECRET = "[secret]"
_SECRETS = re.compile(
    r"""
    -----BEGIN[ A-Z]{0,40}PRIVATE\ KEY-----[\s\S]{0,16384}?-----END[ A-Z]{0,40}PRIVATE\ KEY-----
  | \b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b
  | \b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b
  | \bgithub_pat_[A-Za-z0-9_]{40,}\b
  | \bglpat-[A-Za-z0-9_-]{20,}\b
  | \bxox[abprs]-[A-Za-z0-9-]{10,}\b
  | \b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}\b
  | \bAIza[A-Za-z0-9_-]{35}\b
  | \bhf_[A-Za-z0-9]{30,}\b
    """,
    re.VERBOSE,
)
_EMAIL = re.compile(
    r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b"
)
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_SSN = re.compile(r"(?<![\d-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_PHONE = re.compile(
    r"""
    (?<![\w+])\+\d[\d\s().-]{6,22}\d(?!\w)
  | (?<![\w-])(?:\(\d{3}\)\s?|\d{3}[.-])\d{3}[.-]\d{4}(?![\w-])
    """,
    re.VERBOSE,
)
MIN_PHONE_DIGITS = 8
MAX_PHONE_DIGITS = 15


def masked(text: str) -> str:
    """``text`` with every secret and piece of personal data above masked."""
    text = _SECRETS.sub(SECRET, text)
    text = redact(text, None)
    text = _EMAIL.sub("[email]", text)
    text = _CARD.sub(_card, text)
    text = _SSN.sub("[ssn]", text)
    text = _IBAN.sub("[iban]", text)
    return _PHONE.sub(_phone, text)


def luhn(digits: str) -> bool:
    """Whether ``digits`` pass the Luhn check every payment card number passes."""
    total = 0
    for position, character in enumerate(reversed(digits)):
        digit = ord(character) - 48
        if position % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    found = match.group()
    digits = found.replace(" ", "").replace("-", "")
    return "[card]" if luhn(digits) else found


def _phone(match: re.Match[str]) -> str:
    found = match.group()
    count = sum(character.isdigit() for character in found)
    if found.startswith("+") and not MIN_PHONE_DIGITS <= count <= MAX_PHONE_DIGITS:
        return found
    return "[phone]"
