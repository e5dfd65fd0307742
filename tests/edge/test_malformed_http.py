"""Malformed HTTP gets the OpenAI envelope (or a closed connection), and never leaks the key.

aiohttp answered each of these with a ``text/plain`` 400 quoting the raw header line
(the key included) and logged an ERROR with a traceback that quoted it again.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import orjson
import pytest

from parley.edge.refusals import RefusalLog
from tests.api.harness import Gateway
from tests.edge.corpus import CASES, RawReply, exchange

ENVELOPE_FIELDS = {"message", "type", "param", "code"}


def assert_envelope(reply: RawReply, case: str) -> None:
    assert reply.status is not None and reply.status >= 400, (case, reply.raw[:200])
    assert b"Traceback" not in reply.raw, case
    assert reply.headers.get("content-type", "").startswith("application/json"), (
        case,
        reply.raw[:300],
    )
    error = orjson.loads(reply.body)["error"]
    assert set(error) == ENVELOPE_FIELDS, case
    assert isinstance(error["message"], str) and error["message"], case


def port_of(gateway: Gateway) -> int:
    port = urlsplit(gateway.base_url).port
    assert port is not None
    return port


@pytest.mark.parametrize("case", sorted(CASES))
async def test_each_malformed_request_gets_the_envelope_or_a_close(
    gateway: Gateway, key: str, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reply = await exchange(port_of(gateway), CASES[case](key))
    if reply.status is not None and reply.status >= 300:  # (an Upgrade header is no error)
        assert_envelope(reply, case)
        assert reply.status < 500 or reply.status == 505, (case, reply.status)
    assert key.encode() not in reply.raw
    assert key not in caplog.text
    for record in caplog.records:
        assert record.exc_info is None, (case, record.getMessage())
        assert "\n" not in record.getMessage(), (case, record.getMessage())


async def test_the_whole_corpus_costs_at_most_one_log_line_per_interval(
    gateway: Gateway, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for case in sorted(CASES):
        await exchange(port_of(gateway), CASES[case](key))
    edge_lines = [r for r in caplog.records if r.name == "parley.edge"]
    assert 1 <= len(edge_lines) < len(CASES) // 2  # one per 10 s, the rest counted
    assert key not in caplog.text
    assert "Traceback" not in caplog.text


def test_the_refusal_log_writes_one_line_per_interval_with_a_count() -> None:
    now = [100.0]
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("test.refusals")
    logger.addHandler(Capture())
    refusals = RefusalLog(logger, interval=10.0, clock=lambda: now[0])
    for _ in range(5):
        refusals.refused("10.0.0.1", 400, ValueError("sk-secret"))
    now[0] += 10.0
    refusals.refused("10.0.0.2", 431, "LineTooLong")
    assert lines == [
        "refused a request from 10.0.0.1: 400 ValueError",
        "refused a request from 10.0.0.2: 431 LineTooLong (4 more since the last line)",
    ]
