"""``parley serve --demo`` as a newcomer runs it: the engines start as children, the key
it prints works with the official SDK for chat, speech and transcription, and a SIGTERM
stops the gateway and both engines. On a port already taken it stops at once, as
``parley serve`` does, having started nothing and made no key."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import openai
import pytest

from parley.local.demo.config import CHAT_MODEL, SPEECH_MODEL, TRANSCRIPTION_MODEL
from tests.engines.local import CHAT_PACKAGES, READY_SECONDS, SPEECH_PACKAGES, require
from tests.engines.test_through_parley import SENTENCE, most_words
from tests.process.procs import REPO, environment, free_port

pytestmark = pytest.mark.engines
KEY = re.compile(r"key:\s+(pk-\S+)")
DASHBOARD = re.compile(
    r"dashboard:\s+(http://\S+/admin/)\s+\(sign in: leave the name empty, password (\S+)\)"
)


def children_of(pid: int) -> list[int]:
    found = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False
    )
    return [int(line) for line in found.stdout.split()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if sys.platform == "linux" else ""
    return state != "Z"


def wait_for_key(demo: subprocess.Popen[str], log: Path) -> str:
    deadline = time.monotonic() + 2 * READY_SECONDS
    while time.monotonic() < deadline:
        found = KEY.search(log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if demo.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail("parley serve --demo printed no key; its output:\n" + log.read_text()[-3000:])


def run_printed_examples(output: str, workdir: Path) -> str:
    """Paste what the demo printed, from its first curl to the end of the Python example,
    into a shell; what it wrote."""
    start = output.index("curl ")
    end = output.index("\nPY\n", start) + len("\nPY\n")
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", output[start:end]],
        cwd=workdir,
        env=environment({"PATH": path}),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_dashboard_opens(output: str, port: int, config: Path) -> None:
    """The printed dashboard address and token open the admin surface, which shows the
    demo's group; the token is in no file."""
    found = DASHBOARD.search(output)
    assert found, output
    address, token = found.groups()
    assert address == f"http://127.0.0.1:{port}/admin/"
    assert len(token) >= 16 and token not in config.read_text()
    asked = urllib.request.Request(
        f"http://127.0.0.1:{port}/admin/groups", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(asked, timeout=10) as reply:
        groups = json.load(reply)
    assert [group["name"] for group in groups["data"]] == ["demo"]


def test_the_demo_serves_chat_speech_and_transcription_then_stops_its_engines(
    tmp_path: Path,
) -> None:
    require(CHAT_PACKAGES + SPEECH_PACKAGES)
    port = free_port()
    log = tmp_path / "demo.log"
    with log.open("w") as output:
        demo = subprocess.Popen(
            [sys.executable, "-m", "parley", "serve", "--demo", "--port", str(port)],
            cwd=tmp_path,
            env=environment({"PYTHONPATH": str(REPO)}),
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        key = wait_for_key(demo, log)
        engines = children_of(demo.pid)
        assert len(engines) == 2
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key)
        client.models.list()  # the key is printed once the gateway listens
        chat = client.chat.completions.create(
            model=CHAT_MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=8
        )
        assert chat.choices[0].message.content
        assert_dashboard_opens(log.read_text(), port, tmp_path / "parley-demo" / "parley.yaml")
        speech = client.audio.speech.create(
            model=SPEECH_MODEL, voice="en-f2", input=SENTENCE, response_format="wav"
        )
        heard = client.audio.transcriptions.create(
            model=TRANSCRIPTION_MODEL, file=("hi.wav", speech.content)
        )
        assert most_words(heard.text), heard.text
        assert (tmp_path / "parley-demo" / "parley.yaml").is_file()
        pasted = run_printed_examples(log.read_text(), tmp_path)
        assert '"object":"chat.completion"' in pasted  # the chat curl
        assert most_words(pasted.strip().splitlines()[-1])  # the Python example's transcript
    finally:
        demo.send_signal(signal.SIGTERM)
        status = demo.wait(timeout=60)
    assert status == 0
    assert not [pid for pid in engines if alive(pid)]


def test_a_busy_port_stops_the_demo_before_any_engine_or_key(tmp_path: Path) -> None:
    earlier = tmp_path / "parley-demo" / "parley.yaml"
    earlier.parent.mkdir()
    earlier.write_text("# the configuration of the last start that served\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "parley", "serve", "--demo", "--port", str(port)],
            cwd=tmp_path,
            env=environment({"PYTHONPATH": str(REPO)}),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "already in use" in done.stderr
    assert "Traceback" not in output
    assert "starting the local engines" not in output
    assert "serving" not in output and not KEY.search(output)
    assert not (tmp_path / "parley-demo" / "parley.db").exists(), "no key, no database"
    assert earlier.read_text() == "# the configuration of the last start that served\n"
    assert sorted(path.name for path in earlier.parent.iterdir()) == ["parley.yaml"]
