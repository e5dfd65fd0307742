"""``/metrics`` with ``serve --workers 2``: whichever worker answers a scrape, it reports
every worker's calls (prometheus-client's multiprocess mode), and the shared folder is
gone after shutdown."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.process.calls import MODEL, Chat, burst, gateway_config
from tests.process.procs import Processes, eventually

CALLS = 24


def requests_total(base_url: str) -> float:
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "parley_requests_total" and sample.labels.get("model") == MODEL
    )


def test_every_worker_reports_the_calls_of_all(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    private = tmp_path / "tmp"  # the server's own: another test's server cannot share it
    private.mkdir()
    config = gateway_config(engine, tmp_path, limits={"per_worker": True})
    server = procs.serve(config, args=("--workers", "2"), wait=False, env={"TMPDIR": str(private)})
    key = server.create_key()
    server.wait_ready()
    replies = burst([Chat(server.v1, key) for _ in range(CALLS)], concurrency=8)
    assert [reply.status for reply in replies] == [200] * CALLS
    # each scrape is a new connection, taken by either worker: once every worker has
    # folded its counts (at most a second later), all of them report every call
    eventually(
        lambda: {requests_total(server.base_url) for _ in range(10)} == {CALLS},
        "every worker reports all the calls",
        timeout=15,
    )
    shared = set(private.glob("parley-metrics-*"))
    assert len(shared) == 1
    assert server.terminate() == 0
    assert not Path(shared.pop()).exists()
