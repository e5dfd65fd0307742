"""What of an upstream's refusal may reach a caller: no credential, plain names only."""

from __future__ import annotations

import base64
import itertools
import string
import sys
import unicodedata

import orjson
import pytest
from hypothesis import assume, given, settings
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
        ("xi-api-key: 0a1b2c3d4e5f", f"xi-api-key: {REDACTED}"),
        (
            "key sk_3f9a0c1b2d4e5f60718293a4b5c6d7e8f9012345 is invalid",
            f"key {REDACTED} is invalid",
        ),
        ("X-API-Key sk_car_Ab12Cd34Ef56Gh78Ij90 refused", f"X-API-Key {REDACTED} refused"),
        ("key sk_car_Ab12Cd34Ef56Gh78Ij90.", f"key {REDACTED}."),
        ("sent Token 0123456789abcdef0123456789abcdef01234567.", f"sent {REDACTED}."),
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
        "unknown field task_id_column; see disk_usage_metrics",
        "Input too long: token 4097 of 4096; token deadbeef is not a key",
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
    # A key that shares a run of six characters with the message (``temperat``) is in it.
    assume(not shares_a_run(key, text, 6))
    assert redact(text, key) == text


def shares_a_run(key: str, text: str, size: int) -> bool:
    """Whether ``size`` consecutive characters of ``key`` (or of it reversed) stand in
    ``text``, ignoring case."""
    folded = text.casefold()
    return any(
        word[start : start + size] in folded
        for word in (key.casefold(), key.casefold()[::-1])
        for start in range(len(word) - size + 1)
    )


# The key cut into pieces by other words, or reversed


def test_a_key_cut_by_other_words_leaves_no_long_piece() -> None:
    key = "sk-ant-STORED-0123456789abcdefghij"  # 34 characters
    text = f"first {key[:10]} then {key[10:]}, thanks"
    assert exposes(text, key)
    redacted = redact(text, key)
    assert not exposes(redacted, key)
    assert redacted == f"first {key[:10]} then {REDACTED}, thanks"  # 10 characters: too few
    assert redact(f"first {key[:12]} then {key[12:]}", key) == f"first {REDACTED} then {REDACTED}"


def test_a_key_reversed_whole_or_in_pieces_is_redacted() -> None:
    backwards = LONG_KEY[::-1]
    assert redact(f"key: {backwards}.", LONG_KEY) == f"key: {REDACTED}."
    pieces = f"a {backwards[:14]} b {backwards[14:]} c"
    assert redact(pieces, LONG_KEY) == f"a {REDACTED} b {REDACTED} c"


def test_a_piece_hidden_by_disguises_is_found_in_the_reading() -> None:
    piece = LONG_KEY[5:19]
    disguised = "%" + piece[0].encode().hex() + "\u200b".join(piece[1:])
    redacted = redact(f"see {disguised} here", LONG_KEY)
    assert redacted == f"see {REDACTED} here"


@settings(max_examples=200, deadline=None)
@given(
    key=st.text(string.ascii_letters + string.digits + "-_.", min_size=12, max_size=80),
    cuts=st.lists(st.integers(min_value=1, max_value=79), max_size=5),
    glue=st.sampled_from([" then ", ", ", " / ", "\n", " and also "]),
    backwards=st.booleans(),
)
def test_no_piece_of_twelve_characters_survives_however_the_key_is_cut(
    key: str, cuts: list[int], glue: str, backwards: bool
) -> None:
    spelled = key[::-1] if backwards else key
    points = sorted({0, len(spelled), *(cut for cut in cuts if cut < len(spelled))})
    pieces = [spelled[a:b] for a, b in itertools.pairwise(points)]
    text = f"upstream said: {glue.join(pieces)} (end)"
    redacted = redact(text, key)
    readings = [redacted, "".join(redacted.split())]
    for start in range(len(key) - 11):
        for word in (key, key[::-1]):
            assert all(word[start : start + 12] not in reading for reading in readings)


@pytest.mark.parametrize("size", [1, 11, 12, 13, 24, 100])
def test_pieces_shorter_than_twelve_are_left(size: int) -> None:
    key = "".join(chr(ord("A") + n % 26) + str(n % 10) for n in range(60))  # no repeats
    text = f"x {key[:size]} y"
    expected = text if size < 12 else f"x {REDACTED} y"
    assert redact(text, key) == expected
