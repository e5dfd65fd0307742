"""The book of live realtime sessions, and the ids that tie a session's request-log lines
to it."""

from __future__ import annotations

from parley.domain.realtime_sessions import is_session_id, lines_prefix, session_of
from parley.runtime.live_sessions import LiveSessions


def test_a_session_is_listed_and_counted_until_it_closes() -> None:
    book = LiveSessions()
    first = book.opened(
        model="voice", kind="relay", group_id=1, group="a", key_id=4, key_name="", key_prefix="p"
    )
    second = book.opened(
        model="voice", kind="cascade", group_id=2, group="b", key_id=5, key_name="", key_prefix="q"
    )
    assert [s.id for s in book.sessions()] == [first.id, second.id]
    assert book.sessions(group_id=2) == [second]
    assert (len(book), book.by_model()) == (2, {"voice": 2})
    book.closed(first)
    book.closed(first)  # twice is once
    assert (book.sessions(), book.by_model()) == ([second], {"voice": 1})
    book.closed(second)
    assert (len(book), book.by_model()) == (0, {"voice": 0})


def test_a_sessions_request_ids_name_it_and_no_other() -> None:
    book = LiveSessions()
    entry = book.opened(
        model="voice", kind="relay", group_id=1, group="a", key_id=4, key_name="", key_prefix="p"
    )
    ids = [entry.request_id() for _ in range(12)]
    assert len(set(ids)) == 12
    assert all(session_of(i) == entry.id and i.startswith(lines_prefix(entry.id)) for i in ids)
    assert is_session_id(entry.id)
    entry.turn()
    assert entry.turns == 1
    for other in ("req_0123456789abcdef_1", "batch_req_abc_1", f"{entry.id}_x", entry.id):
        assert session_of(other) is None
    assert not is_session_id("rtsess_0123456789ABCDEF")
    assert not is_session_id("rtsess_0123456789abcde")
