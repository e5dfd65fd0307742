"""The operator's path, as real processes: the CLI sets up a group and a key, ``parley
serve`` answers the official SDK with it, and a revocation reaches the running server.

Also: a bad config stops ``serve`` with one line (no traceback), no config at all serves
an empty gateway on ``./parley.db``, ``--workers`` and the memory limiter, ``db upgrade``.
"""

from __future__ import annotations

import shutil
import time
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import openai
import pytest

from bench.kernel import listen_backlog, somaxconn
from parley.domain.keys import display_prefix
from tests.process.calls import MODEL, Chat, call, gateway_config, get
from tests.process.procs import Processes, free_port, run_cli, run_ok, write_config

REVOCATION_SECONDS = 5.0
"""The server re-reads keys every 0.2 s (``limits.cache_refresh_seconds``)."""


def test_cli_key_serves_the_sdk_and_its_revocation_reaches_the_server(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    write_config(tmp_path / "parley.yaml", gateway_config(engine, tmp_path))
    assert "team\trpm=100" in run_ok(["groups", "create", "team", "--rpm", "100"], tmp_path)

    created = run_cli(["keys", "create", "--group", "team"], tmp_path)
    assert created.returncode == 0, created.stderr
    lines = created.stdout.splitlines()
    assert len(lines) == 1, created.stdout
    key = lines[0]
    assert key.startswith("pk-")
    assert key not in created.stderr

    server = procs.serve(None, cwd=tmp_path, wait=False)  # ./parley.yaml, the default
    listing = run_ok(["keys", "list"], tmp_path)
    assert key not in listing
    assert display_prefix(key) in listing
    assert key[: len(display_prefix(key)) + 1] not in listing
    key_id, shown_prefix, group, state, *_ = listing.splitlines()[0].split("\t")
    assert (shown_prefix, group, state) == (f"{display_prefix(key)}…", "group=team", "active")
    server.wait_ready()

    with openai.OpenAI(base_url=server.v1, api_key=key, max_retries=0, timeout=10) as client:
        reply = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi there"}]
        )
        assert reply.choices[0].message.content == "echo: hi there"
        assert reply.usage is not None and reply.usage.total_tokens > 0
        stream = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "a b c"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == (
            "echo: a b c"
        )

        assert "revoked" in run_ok(["keys", "revoke", key_id], tmp_path)
        deadline = time.monotonic() + REVOCATION_SECONDS
        while call(Chat(server.v1, key)).status != 401:
            assert time.monotonic() < deadline, f"the key works {REVOCATION_SECONDS}s after"
            time.sleep(0.05)
        with pytest.raises(openai.AuthenticationError) as refused:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
        assert refused.value.code == "invalid_api_key"


UNDECLARED_MODEL = {
    "channels": [{"name": "engine", "base_url": "http://127.0.0.1:9/v1", "models": ["ghost"]}]
}
UNKNOWN_TYPE = {
    "channels": [
        {"name": "gem", "type": "watsonx", "base_url": "http://127.0.0.1:9", "models": ["c"]}
    ],
    "models": [{"name": "c"}],
}
UNSET_VARIABLE = {
    "channels": [
        {
            "name": "engine",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key": "${NO_SUCH_VARIABLE_FOR_PARLEY_TESTS}",
            "models": ["chat"],
        }
    ],
    "models": [{"name": "chat"}],
}


@pytest.mark.parametrize(
    ("config", "names"),
    [
        ({"server": {"port": "abc"}}, ["server.port", "integer"]),
        (UNDECLARED_MODEL, ["engine", "ghost", "not declared"]),
        ("server: [port: 1\n  host: x", ["not valid YAML", "line"]),
        (UNSET_VARIABLE, ["channels[0].api_key", "NO_SUCH_VARIABLE_FOR_PARLEY_TESTS"]),
        ({"database": {"url": "mysql://db/parley"}}, ["database.url", "postgresql://"]),
        ({"limits": {"backend": "redis"}}, ["redis"]),
        ({"usage": {"flush_seconds": 0}}, ["usage.flush_seconds"]),
        ({"surprise": 1}, ["surprise"]),
        (
            UNKNOWN_TYPE,
            ["channels[0].type: unknown channel type 'watsonx' (known: ", "openai", "vllm"],
        ),
    ],
    ids=[
        "port",
        "undeclared-model",
        "yaml",
        "unset-var",
        "db-url",
        "no-redis",
        "zero",
        "unknown",
        "channel-type",
    ],
)
def test_a_bad_config_stops_serve_with_one_line(
    tmp_path: Path, config: dict[str, Any] | str, names: list[str]
) -> None:
    path = tmp_path / "bad.yaml"
    if isinstance(config, str):
        path.write_text(config, encoding="utf-8")
    else:
        write_config(path, config)
    # It stops by itself, before opening the database (no timing: a busy machine may take
    # seconds to import; ``run_cli``'s own generous timeout only guards against a hang).
    done = run_cli(["serve", "--config", str(path), "--port", str(free_port())], tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("parley: ")
    for name in names:
        assert name in lines[0]
    assert not (tmp_path / "parley.db").exists()


def test_without_any_config_serve_runs_an_empty_gateway_on_sqlite(
    procs: Processes, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run_ok(["groups", "create", "team"], empty)
    key = run_ok(["keys", "create", "--group", "team"], empty).strip()
    server = procs.serve(None, cwd=empty)
    assert (empty / "parley.db").exists()
    assert not list(empty.glob("*.yaml"))
    log = server.output()
    assert "no channels are configured" in log
    assert "parley groups create team" in log
    assert f"database sqlite:///{(empty / 'parley.db').resolve()}" in log

    models = get(f"{server.v1}/models", key)
    assert models.status == 200
    assert models.json()["data"] == []
    assert get(f"{server.v1}/models", "pk-wrong").status == 401


def test_workers_need_a_shared_limiter_or_per_worker_counting(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    memory = write_config(tmp_path / "memory.yaml", gateway_config(engine, tmp_path))
    refused = run_cli(
        ["serve", "--config", str(memory), "--port", str(free_port()), "--workers", "2"],
        tmp_path,
    )
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "--workers 2" in lines[0]
    assert "per_worker: true" in lines[0]
    assert "Traceback" not in refused.stderr

    config = gateway_config(engine, tmp_path, limits={"per_worker": True})
    server = procs.serve(config, args=("--workers", "2"), wait=False)
    key = server.create_key()
    server.wait_ready()
    listeners = _wait_for_listeners(server.pid, server.port, count=2)

    connections = [HTTPConnection("127.0.0.1", server.port, timeout=10) for _ in range(20)]
    try:
        for connection in connections:
            connection.request(
                "POST",
                "/v1/chat/completions",
                body=f'{{"model": "{MODEL}", "messages": [{{"role": "user", "content": "hi"}}]}}',
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            reply = connection.getresponse()
            assert reply.status == 200, reply.read()
            reply.read()
        client_ports = {c.sock.getsockname()[1] for c in connections}
        served_by = _owners(server.pid, server.port, client_ports)
    finally:
        for connection in connections:
            connection.close()
    assert set(served_by) == set(listeners), "both workers should have taken connections"
    assert server.terminate() == 0


def test_db_upgrade_brings_a_sqlite_database_up_to_date(tmp_path: Path) -> None:
    config = write_config(tmp_path / "parley.yaml", {"database": {"url": "sqlite:///./fresh.db"}})
    for _ in range(2):  # creating the schema, then finding nothing to do
        done = run_cli(["db", "upgrade"], tmp_path, config=config)
        assert done.returncode == 0, done.stderr
        fresh = (tmp_path / "fresh.db").resolve()
        assert done.stdout.strip() == f"database at sqlite:///{fresh} is up to date"
    assert (tmp_path / "fresh.db").stat().st_size > 0
    assert run_ok(["groups", "list"], tmp_path, config=config) == ""


# Which worker holds which socket: /proc/net/tcp maps ports to socket inodes, and each
# worker's /proc/<pid>/fd links to the inodes it holds.

LISTEN, ESTABLISHED = "0A", "01"


def _wait_for_listeners(parent: int, port: int, count: int) -> set[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        inodes = {inode for local, _, state, inode in _tcp() if local == port and state == LISTEN}
        owners = {pid for pid, held in _descendant_sockets(parent).items() if held & inodes}
        if len(owners) >= count:
            return owners
        time.sleep(0.05)
    pytest.fail(f"{count} workers were not listening on {port} within 30s")


def _owners(parent: int, port: int, client_ports: set[int]) -> dict[int, int]:
    """Worker pid → how many of the clients' connections it holds."""
    inodes = {
        inode
        for local, remote, state, inode in _tcp()
        if local == port and remote in client_ports and state == ESTABLISHED
    }
    assert len(inodes) == len(client_ports)
    held = _descendant_sockets(parent)
    return {pid: len(sockets & inodes) for pid, sockets in held.items() if sockets & inodes}


def _tcp() -> list[tuple[int, int, str, str]]:
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                local, remote = (int(f.rsplit(":", 1)[1], 16) for f in fields[1:3])
                rows.append((local, remote, fields[3], fields[9]))
    return rows


def _descendant_sockets(parent: int) -> dict[int, set[str]]:
    sockets: dict[int, set[str]] = {}
    pending = [parent]
    while pending:
        pid = pending.pop()
        proc = Path(f"/proc/{pid}")
        try:
            for task in (proc / "task").iterdir():
                pending += [int(p) for p in (task / "children").read_text().split()]
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue  # gone meanwhile
        sockets[pid] = {link[8:-1] for link in map(_link, fds) if link.startswith("socket:[")}
    return sockets


def _link(fd: Path) -> str:
    try:
        return str(fd.readlink())
    except OSError:
        return ""  # closed meanwhile


def test_the_accept_backlog_is_the_configured_one(procs: Processes, tmp_path: Path) -> None:
    """``server.backlog`` reaches ``listen()`` (``ss`` shows it as the socket's Send-Q)."""
    if shutil.which("ss") is None:
        pytest.skip("needs ss (iproute2) to read a listening socket's backlog")
    engine_url = procs.engine()
    configured = procs.serve(gateway_config(engine_url, tmp_path, server={"backlog": 77}))
    default = procs.serve(gateway_config(engine_url, tmp_path), name="default")

    assert listen_backlog(configured.port) == 77
    assert listen_backlog(default.port) == min(16384, somaxconn() or 16384)
