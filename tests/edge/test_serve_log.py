"""``parley serve`` as a subprocess: a batch of malformed requests carrying a real key and
the admin token leaves neither (nor the channel key) in its output, and no traceback.

Before: aiohttp logged an ERROR with the raw header line, full key included, for every
``Authorization`` with a control byte or any header over 8,190 bytes, access log or not.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.edge.corpus import CASES, exchange
from tests.process.calls import gateway_config
from tests.process.procs import Processes

ADMIN_TOKEN = "admin-token-7f3a9c1e5b2d4f6a8c0e"
CHANNEL_KEY = "sk-channel-5e8b1d4a7c2f9e3b6d0a"


async def send_corpus(port: int, secrets: list[str]) -> set[int | None]:
    statuses: set[int | None] = set()
    for secret in secrets:
        for build in CASES.values():
            statuses.add((await exchange(port, build(secret))).status)
    return statuses


def test_malformed_requests_leave_no_secret_and_no_traceback_in_the_log(
    procs: Processes, tmp_path: Path
) -> None:
    config = gateway_config(
        procs.engine(),
        tmp_path,
        server={"access_log": True},
        admin={"token": ADMIN_TOKEN},
    )
    config["channels"][0]["api_key"] = CHANNEL_KEY
    server = procs.serve(config)
    key = server.create_key()

    statuses = asyncio.run(send_corpus(server.port, [key, ADMIN_TOKEN]))
    assert {400, 431}.issubset(statuses)

    assert server.terminate() == 0
    log = server.output()
    assert "refused a request" in log  # the refusals were seen, in one short line
    for secret in (key, ADMIN_TOKEN, CHANNEL_KEY):
        assert secret not in log
    assert "Traceback" not in log
    assert "Error handling request" not in log  # aiohttp's own ERROR line
