"""The admin gate's pieces: the Bearer header, failed attempts per address, sessions."""

from __future__ import annotations

import pytest

from parley.admin.auth import (
    FAILURE_WINDOW,
    MAX_FAILURES,
    FailedAttempts,
    Sessions,
    bearer_token,
    token_matches,
)
from parley.errors import RateLimited


def test_only_a_well_formed_bearer_header_yields_a_token() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer abc") == "abc"
    for bad in (None, "", "abc", "Basic abc", "Bearer", "Bearer ", "Bearer a b"):
        assert bearer_token(bad) is None, bad
    assert token_matches("secret", "secret") and not token_matches("secre", "secret")
    assert not token_matches(None, "secret")


def test_failures_are_counted_per_address_in_a_sliding_window() -> None:
    now = [1000.0]
    attempts = FailedAttempts(clock=lambda: now[0])
    for _ in range(MAX_FAILURES):
        attempts.check("10.0.0.1")
        attempts.failed("10.0.0.1")
    with pytest.raises(RateLimited) as caught:
        attempts.check("10.0.0.1")
    assert "Try again in about 5 minutes" in caught.value.message
    attempts.check("10.0.0.2")  # another address is not braked
    now[0] += FAILURE_WINDOW + 1
    attempts.check("10.0.0.1")
    attempts.failed("10.0.0.1")
    attempts.succeeded("10.0.0.1")
    attempts.check("10.0.0.1")


def test_sessions_are_signed_by_the_token_and_end_on_logout() -> None:
    sessions = Sessions("token-one")
    session, cookie = sessions.new()
    assert "token-one" not in cookie
    assert sessions.read(cookie) == session
    tampered = ("A" if cookie[0] != "A" else "B") + cookie[1:]  # a whole 6-bit digit changed
    assert sessions.read(tampered) is None
    assert Sessions("token-two").read(cookie) is None  # a new token ends every session
    assert Sessions("token-one", max_age=-1).read(cookie) is None  # expired
    sessions.end(session)
    assert sessions.read(cookie) is None
    assert session.actor == "token"  # the audit log names who signed in, not the session
    named, _ = sessions.new("olivia")
    assert named.actor == "olivia"
