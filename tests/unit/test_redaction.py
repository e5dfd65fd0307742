"""What of an upstream's refusal may reach a caller: no credential, plain names only."""

from __future__ import annotations

import base64
import string
import sys
import unicodedata

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parley.providers.openai.refusal import refusal
from parley.providers.redaction import REDACTED, redact
from tests.upstreams.key_spellings import exposes, spellings

KEY = "my-channel-key-42"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bad key my-channel-key-42 given", f"bad key {REDACTED} given"),
        ("Authorization: Bearer abc.def-ghi", f"Authorization: {REDACTED}"),
        ('{"authorization": "Basic dXNlcjpwYXNz"}', f'{{"authorization": "{REDACTED}"}}'),
        ("proxy-authorization=token zzz", f"proxy-authorization={REDACTED}"),
        ("x-api-key: abcdef; next", f"x-api-key: {REDACTED}; next"),
        ("api_key='k1'", f"api_key='{REDACTED}'"),
        ("sent bearer 0123456789abcdef", f"sent {REDACTED}"),
        (
            "Incorrect API key provided: sk-proj-AbC123xyz789",
            f"Incorrect API key provided: {REDACTED}",
        ),
        ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sig_nature", f"token {REDACTED}"),
    ],
)
def test_credentials_are_redacted(text: str, expected: str) -> None:
    assert redact(text, KEY) == expected


@pytest.mark.parametrize(
    "text",
    [
        "This model's maximum context length is 4096 tokens. However, you requested 5000.",
        "Basic validation failed: the bearer token field is missing",
        "messages[0].content must be a string; see the task-list docs",
        "Invalid value for 'temperature': 3.5 > 2",
    ],
)
def test_ordinary_messages_are_untouched(text: str) -> None:
    assert redact(text, KEY) == text


def test_a_short_key_is_not_searched_for_literally() -> None:
    assert redact("a b c", "a") == "a b c"


def envelope(**fields: object) -> bytes:
    return orjson.dumps({"error": {"message": "Refused.", **fields}})


def test_plain_type_code_and_param_are_relayed() -> None:
    raw = envelope(type="invalid_request_error", code="context_length_exceeded", param="messages")
    error = refusal("main", 400, raw, KEY)
    assert error.body()["error"] == {
        "message": "Refused.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    assert error.headers == {"x-parley-upstream-error": "relayed"}


@pytest.mark.parametrize(
    "value", [400, "has spaces", "x" * 65, KEY, "sk-abcdefgh12345678", None, ["a"]]
)
def test_other_codes_and_params_are_not_relayed(value: object) -> None:
    error = refusal("main", 422, envelope(type=value, code=value, param=value), KEY)
    body = error.body()["error"]
    assert (body["type"], body["code"], body["param"]) == ("invalid_request_error", None, None)
    assert error.status == 422


def test_a_long_message_is_cut_after_it_is_redacted() -> None:
    message = "x" * 490 + " " + KEY + " " + "y" * 2000
    error = refusal("main", 400, orjson.dumps({"error": {"message": message}}), KEY)
    assert "my-channel" not in error.message
    assert len(error.message) == 500


def test_a_refusal_naming_the_channel_relays_nothing() -> None:
    error = refusal("main", 401, envelope(code="invalid_api_key", param=KEY), KEY)
    assert error.retryable
    assert error.message == "The upstream channel `main` failed (status 401)."
    assert "x-parley-upstream-error" not in error.headers


# The channel's key in every spelling a message can carry it


LONG_KEY = "sk-channel-secret-0123456789"


@pytest.mark.parametrize(("name", "spelled"), sorted(spellings(LONG_KEY).items()))
def test_every_spelling_of_the_key_is_redacted(name: str, spelled: str) -> None:
    text = f"Bad header: Authorization was {spelled}; see the docs."
    assert exposes(text, LONG_KEY), "the spelling gives the key away unredacted"
    redacted = redact(text, LONG_KEY)
    assert not exposes(redacted, LONG_KEY)
    assert REDACTED in redacted
    assert redacted.startswith("Bad header: Authorization was ")
    assert redacted.endswith("; see the docs.")


@pytest.mark.parametrize(
    "gap",
    sorted(
        chr(code)
        for code in range(sys.maxunicode + 1)
        if chr(code).isspace() or unicodedata.category(chr(code)) == "Cf"
    ),
)
def test_any_whitespace_or_format_character_between_characters_is_seen_through(
    gap: str,
) -> None:
    assert REDACTED in redact(f"key: {gap.join(LONG_KEY)} end", LONG_KEY)


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(string.ascii_letters + string.digits + "-_.", min_size=7, max_size=64),
    before=st.binary(max_size=5),
    after=st.binary(max_size=5),
    urlsafe=st.booleans(),
)
def test_the_key_in_base64_is_found_at_any_alignment(
    key: str, before: bytes, after: bytes, urlsafe: bool
) -> None:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    text = f"credentials {encode(before + key.encode() + after).decode()} refused"
    assert not exposes(redact(text, key), key)


@settings(max_examples=200, deadline=None)
@given(key=st.text(string.ascii_letters + string.digits, min_size=8, max_size=40))
def test_a_message_without_the_key_keeps_its_words(key: str) -> None:
    text = "Invalid value for 'temperature': 3.5 > 2 (see https://example.com/a%20b)"
    assert redact(text, key) == text
