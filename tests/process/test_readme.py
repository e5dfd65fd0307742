"""The README works as written: every fenced block in it is a named snippet, and every
snippet is run here, from a fresh clone, as a reader would run it.

Each block is marked by an HTML comment (``<!-- snippet: NAME -->``) just above it, and
this module has a step for every name; a block without a mark, or a mark without a step,
fails. Shell snippets run verbatim in bash, with three stand-ins a test needs:

- ``pip`` is a shell function that records its arguments: the test environment already
  has Parley and its dependencies, and a test must not install packages;
- ``parley`` runs ``python -m parley`` with this interpreter (the one with the
  dependencies), in the clone, so the clone's code is what runs;
- the server listens on a free port (``PARLEY_PORT``), which replaces ``8080`` in the
  snippets that call it, and the local engine's address is the fake engine's.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from tests.process.procs import (
    REPO,
    STOP_SECONDS,
    Processes,
    Server,
    _healthy,
    free_port,
    wait_until,
)

README = REPO / "README.md"
MARK = re.compile(r"<!-- snippet: ([\w-]+) -->\n([ \t]*)```(\w*)\n(.*?)\n[ \t]*```", re.S)
FENCES = re.compile(r"^[ \t]*```", re.M)
STEPS = {
    "get",
    "serve-default",
    "test-suite",
    "health",
    "config-local",
    "export-key",
    "config-hosted",
    "group-and-key",
    "serve",
    "curl-chat",
    "python-sdk",
    "usage",
    "metrics",
    "cli-synopsis",
    "demo",
    "demo-python",
}
LOCAL_ENGINE = "http://127.0.0.1:11434/v1"
SHELL_SECONDS = 60


@dataclass(frozen=True)
class Snippet:
    name: str
    language: str
    text: str


def snippets() -> dict[str, Snippet]:
    text = README.read_text(encoding="utf-8")
    found: dict[str, Snippet] = {}
    for match in MARK.finditer(text):
        name, indent, language, body = match.groups()
        assert name not in found, f"snippet {name} appears twice"
        lines = [line.removeprefix(indent) for line in body.splitlines()]
        found[name] = Snippet(name, language, textwrap.dedent("\n".join(lines)))
    fences = len(FENCES.findall(text))
    assert fences == 2 * len(found), "every fenced block in README.md needs a snippet mark"
    return found


def test_every_block_in_the_readme_is_a_snippet_this_module_runs() -> None:
    assert set(snippets()) == STEPS


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    command = snippets()["test-suite"].text.strip()
    assert command == "pip install -e '.[test,local]' && python -m pytest -n 2"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in ci, ".ci/run must run the README's test command verbatim"


def test_the_docs_stand_alone() -> None:
    """No reference to a file outside the repository; every relative link resolves."""
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for outside in ("../", "shared/", "DESIGN.md", "/work/"):
            assert outside not in text, f"{page.name} refers to {outside!r} outside the repo"
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


class Reader:
    """A reader's shell: snippets run in bash in ``cwd`` with the stand-ins above."""

    def __init__(self, procs: Processes, cwd: Path, port: int) -> None:
        self.procs = procs
        self.cwd = cwd
        self.port = port
        self.pip_log = cwd.parent / "pip.log"
        self.exports: dict[str, str] = {}

    def prelude(self) -> str:
        lines = [
            f"export PARLEY_PORT={self.port}",
            f'pip() {{ printf "%s\\n" "$*" >> {shlex.quote(str(self.pip_log))}; }}',
            f'parley() {{ {shlex.quote(sys.executable)} -m parley "$@"; }}',
            *(f"export {name}={shlex.quote(value)}" for name, value in self.exports.items()),
        ]
        return "\n".join(lines) + "\n"

    def local(self, text: str) -> str:
        return text.replace("127.0.0.1:8080", f"127.0.0.1:{self.port}")

    def run(self, snippet: Snippet, tail: str = "") -> subprocess.CompletedProcess[str]:
        script = self.prelude() + "set -e\n" + self.local(snippet.text) + "\n" + tail
        return subprocess.run(
            ["bash", "-c", script],
            cwd=self.cwd,
            env=_environment(),
            capture_output=True,
            text=True,
            timeout=SHELL_SECONDS,
            check=False,
        )

    def run_ok(self, snippet: Snippet, tail: str = "") -> str:
        done = self.run(snippet, tail)
        assert done.returncode == 0, f"{snippet.name}: {done.stderr}"
        return done.stdout

    def start(self, snippet: Snippet, extra: str = "") -> Server:
        proc = self.procs.spawn(
            snippet.name, ["bash", "-c", self.prelude() + extra + snippet.text], self.cwd
        )
        server = Server(proc.name, proc.process, proc.log, self.port, self.cwd)
        self.procs.started[-1] = server
        server.wait_ready()
        return server


def interrupt(server: Server) -> int:
    """Ctrl-C in the reader's terminal: SIGINT to the whole foreground group."""
    os.killpg(server.pid, signal.SIGINT)
    code = server.process.wait(timeout=STOP_SECONDS)
    assert "Traceback" not in server.output()
    return code


def _environment() -> dict[str, str]:
    """This environment without PARLEY_* overrides (the reader has none)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}


def _fresh_clone(tmp_path: Path) -> Path:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing to clone")
    get = snippets()["get"]
    done = subprocess.run(
        ["bash", "-c", "set -e\n" + get.text + "\npython --version"],
        cwd=tmp_path,
        env=_environment() | {"REPO_URL": str(REPO)},
        capture_output=True,
        text=True,
        timeout=SHELL_SECONDS * 2,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    clone = tmp_path / "parley"
    assert (clone / "pyproject.toml").exists()
    version = done.stdout.strip().removeprefix("Python ")
    assert tuple(int(part) for part in version.split(".")[:2]) >= (3, 11), version
    assert (clone / ".venv" / "bin" / "python").exists()
    return clone


def test_a_reader_gets_from_a_fresh_clone_to_an_answer_and_its_cost(
    procs: Processes, engine: str, tmp_path: Path
) -> None:
    steps = snippets()
    clone = _fresh_clone(tmp_path)
    reader = Reader(procs, clone, free_port())

    # quick start: install (recorded), serve the embedded default, check it works
    default = reader.start(steps["serve-default"])
    assert reader.pip_log.read_text().splitlines() == ["install -e ."]
    health = reader.run_ok(steps["health"])
    answer = re.search(r"It answers `([^`]+)`", README.read_text(encoding="utf-8"))
    assert answer is not None
    assert health.strip() == answer.group(1), "the README shows the health reply as it is"
    assert "no channels are configured" in default.output()
    assert interrupt(default) == 0

    # step 1: the local engine's config, pointed at the fake engine
    config = steps["config-local"].text.replace(LOCAL_ENGINE, engine)
    assert config != steps["config-local"].text
    (clone / "parley.yaml").write_text(config, encoding="utf-8")

    # step 2: a group and a key, exported as the reader's shell would keep it
    shown = reader.run_ok(steps["group-and-key"], tail='printf "key=%s" "$PARLEY_KEY"')
    created, key = shown.split("key=")
    assert created.startswith("1\tteam\trpm=600\ttpm=200000\tbudget=$50")
    assert key.startswith("pk-")
    reader.exports["PARLEY_KEY"] = key

    # step 3: serve and call, with curl and with the official SDK
    server = reader.start(steps["serve"])
    reply = orjson.loads(reader.run_ok(steps["curl-chat"]))
    assert reply["choices"][0]["message"]["content"] == "echo: Hello"
    assert reply["model"] == "chat-large"
    sdk = subprocess.run(
        [sys.executable, "-c", reader.local(steps["python-sdk"].text)],
        cwd=clone,
        env=_environment() | {"PARLEY_KEY": key},
        capture_output=True,
        text=True,
        timeout=SHELL_SECONDS,
        check=False,
    )
    assert sdk.returncode == 0, sdk.stderr
    assert sdk.stdout.startswith("echo: Hi CompletionUsage(")

    # step 4: what it cost, at once: the answering server writes its records first
    usage = orjson.loads(reader.run_ok(steps["usage"]))
    assert usage["totals"]["requests"] == 2
    assert usage["total_usage"] > 0

    # watch it: the metrics snippet finds the calls
    metrics = reader.run_ok(steps["metrics"])
    assert 'parley_requests_total{model="chat-large",status="200"} 2.0' in metrics

    # the database is the clone's, next to parley.yaml, whichever command made it
    assert (clone / "parley.db").exists()
    assert interrupt(server) == 0


def test_the_hosted_example_runs_once_its_key_is_exported(procs: Processes, tmp_path: Path) -> None:
    steps = snippets()
    folder = tmp_path / "hosted"
    folder.mkdir()
    (folder / "parley.yaml").write_text(steps["config-hosted"].text, encoding="utf-8")
    reader = Reader(procs, folder, free_port())

    refused = reader.run(steps["serve"])
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines() == [
        "parley: parley.yaml: channels[0].api_key: environment variable OPENAI_API_KEY is not set"
    ]
    server = reader.start(steps["serve"], extra=steps["export-key"].text + "\n")
    assert "capability" not in server.output()
    assert interrupt(server) == 0


def test_the_command_line_synopsis_matches_the_commands() -> None:
    """Each synopsis line's command has a ``--help`` naming every option the line shows
    (in process, through click's runner: ``python -m parley`` itself is run by the
    README's other tests)."""
    from click.testing import CliRunner

    from parley.cli import cli

    runner = CliRunner()
    for line in snippets()["cli-synopsis"].text.splitlines():
        words = line.split()
        assert words[0] == "parley"
        command = [w for w in words[1:] if w.isalpha() and w.islower()][:2]
        options = re.findall(r"--[a-z-]+", line)
        done = runner.invoke(cli, [*command, "--help"], prog_name="parley")
        assert done.exit_code == 0, (line, done.output)
        for option in options:
            assert option in done.output, (line, option)


def test_the_offline_demo_answers_chat_speech_and_transcription(
    procs: Processes, tmp_path: Path
) -> None:
    """The quick start's first command, from a fresh clone: the local engines start, and
    the Python example, given the printed key, gets real chat, speech and a transcript."""
    from tests.engines.local import CHAT_PACKAGES, READY_SECONDS, SPEECH_PACKAGES, require
    from tests.engines.test_through_parley import most_words

    require(CHAT_PACKAGES + SPEECH_PACKAGES)
    steps = snippets()
    clone = _fresh_clone(tmp_path)
    reader = Reader(procs, clone, free_port())
    proc = procs.spawn("demo", ["bash", "-c", reader.prelude() + steps["demo"].text], clone)
    server = Server(proc.name, proc.process, proc.log, reader.port, clone)
    procs.started[-1] = server
    wait_until(server, lambda: _healthy(server.base_url), "the demo", timeout=READY_SECONDS)
    assert reader.pip_log.read_text().splitlines() == ["install -e .[local]"]
    key = re.search(r"^export PARLEY_KEY=(pk-\S+)$", server.output(), re.M)
    assert key is not None, server.output()
    done = subprocess.run(
        [sys.executable, "-c", reader.local(steps["demo-python"].text)],
        cwd=clone,
        env=_environment() | {"PARLEY_KEY": key.group(1)},
        capture_output=True,
        text=True,
        timeout=SHELL_SECONDS * 3,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer, *_, heard = done.stdout.strip().splitlines()
    assert answer.strip(), "the chat example prints the model's answer"
    assert most_words(heard), done.stdout
    assert interrupt(server) == 0
