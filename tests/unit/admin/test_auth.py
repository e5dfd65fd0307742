"""The admin gate's pieces: the Bearer header, failed attempts per address, sessions."""

from __future__ import annotations

from parley.admin.auth import (
    FAILURE_DELAY,
    FAILURE_WINDOW,
    MAX_FAILURE_DELAY,
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
    for count in range(1, MAX_FAILURES + 1):
        failure = attempts.failed("10.0.0.1")
        assert not failure.locked_out and failure.delay == 0 and failure.refusal is None
        assert failure.began_lock_out == (count == MAX_FAILURES)
    assert attempts.locked_out("10.0.0.1")
    failure = attempts.failed("10.0.0.1")
    assert failure.locked_out and not failure.began_lock_out
    assert isinstance(failure.refusal, RateLimited)
    assert "Try again in about 5 minutes" in failure.refusal.message
    assert not attempts.locked_out("10.0.0.2")  # another address is not braked
    now[0] += FAILURE_WINDOW + 1
    assert not attempts.locked_out("10.0.0.1")
    assert attempts.failed("10.0.0.1").refusal is None
    attempts.succeeded("10.0.0.1")
    assert not attempts.locked_out("10.0.0.1")


def test_wrong_attempts_past_the_limit_wait_longer_each_time_up_to_a_ceiling() -> None:
    attempts = FailedAttempts(clock=lambda: 1000.0)
    delays = [attempts.failed("10.0.0.1").delay for _ in range(MAX_FAILURES + 8)]
    assert delays[:MAX_FAILURES] == [0.0] * MAX_FAILURES
    past = delays[MAX_FAILURES:]
    assert past[0] == FAILURE_DELAY and past[1] == 2 * FAILURE_DELAY
    assert past == sorted(past) and past[-1] == MAX_FAILURE_DELAY


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
