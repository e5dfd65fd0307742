"""``serve`` fails cleanly: a port in use is one line naming the address and the process
that holds it, before any "serving on" line; a capability no channel serves is a warning."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from parley.cli.listen import port_holder
from tests.process.calls import gateway_config
from tests.process.procs import Processes, free_port, run_cli, write_config

HOLD_PORT = """
import socket, sys, time
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen()
print("holding", flush=True)
time.sleep(120)
"""


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on {port}")


def test_a_port_in_use_is_one_line_naming_the_holder(procs: Processes, tmp_path: Path) -> None:
    port = free_port()
    holder = procs.spawn("holder", [sys.executable, "-c", HOLD_PORT, str(port)], tmp_path)
    _wait_listening(port)
    config = write_config(tmp_path / "parley.yaml", {"server": {"port": port}})

    for args in (["serve"], ["serve", "--workers", "2"]):
        extra = {"limits": {"per_worker": True}} if "--workers" in args else {}
        write_config(config, {"server": {"port": port}, **extra})
        done = run_cli(args, tmp_path, config=config, timeout=20)
        assert done.returncode == 1, done.stderr
        output = done.stdout + done.stderr
        assert "Traceback" not in output
        assert "serving on" not in output
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"parley: cannot listen on 127.0.0.1:{port}")
        assert "already in use" in lines[0]
        assert f"pid {holder.pid}" in lines[0]
        assert "--port" in lines[0]
    assert not (tmp_path / "parley.db").exists(), "nothing is created before the port is ours"


def test_an_address_that_is_not_ours_is_one_line(tmp_path: Path) -> None:
    done = run_cli(
        ["serve", "--host", "192.0.2.1", "--port", str(free_port())], tmp_path, timeout=20
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "cannot listen on 192.0.2.1" in lines[0]
    assert "not an address of this machine" in lines[0]


def test_a_capability_no_channel_serves_is_a_start_up_warning(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    config = gateway_config(engine, tmp_path)
    config["models"] += [{"name": "vision-small", "kind": "chat", "aliases": ["eyes"]}]
    config["capabilities"] = {"LLM_CHAT": "chat-large", "LLM_VISION": "eyes"}
    server = procs.serve(config)
    log = server.output()
    assert "capability LLM_VISION names model `eyes`, which no channel serves" in log
    assert "LLM_CHAT" not in log
    assert server.terminate() == 0


def test_the_holder_is_named_only_when_visible(tmp_path: Path) -> None:
    """Without a listener on the port there is nobody to name."""
    port = free_port()
    assert port_holder(port) is None
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        assert port_holder(port) == f"pid {os.getpid()} ({_own_command()})"


def _own_command() -> str:
    raw = Path(f"/proc/{os.getpid()}/cmdline").read_bytes()
    return " ".join(b" ".join(raw.split(b"\0")).decode().split())[:120]
