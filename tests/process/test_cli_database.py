"""The CLI cannot pick the wrong database, and admin commands need no channel secrets.

- A relative SQLite path in a config file is relative to that file's folder, wherever
  the command runs; every admin command says on stderr which database (and config) it used.
- ``keys create --group X`` for an unknown group names the groups that exist.
- ``groups``/``keys``/``usage``/``db`` run with a channel's ``${API_KEY}`` unset; ``serve``
  names every unset variable in one line.
- ``parley --help`` loads neither SQLAlchemy, Alembic nor aiohttp; an admin command on an
  up-to-date database loads neither Alembic nor aiohttp; ``serve`` with a bad config stops
  before it loads any of them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.process.procs import environment, free_port, run_cli, run_ok, write_config

SECRETS_CONFIG = {
    "database": {"url": "sqlite:///./data/parley.db"},
    "admin": {"token": "${PARLEY_TEST_UNSET_ADMIN_TOKEN}"},
    "channels": [
        {
            "name": "hosted",
            "base_url": "https://api.openai.com/v1",
            "api_key": "${PARLEY_TEST_UNSET_OPENAI_KEY}",
            "models": ["chat"],
        }
    ],
    "models": [{"name": "chat"}],
}


def _config_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "etc"
    (folder / "data").mkdir(parents=True)
    write_config(folder / "parley.yaml", SECRETS_CONFIG)
    return folder


def test_a_relative_sqlite_path_is_relative_to_the_config_file(tmp_path: Path) -> None:
    folder = _config_dir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = folder / "parley.yaml"

    created = run_cli(["groups", "create", "team"], elsewhere, config=config)
    assert created.returncode == 0, created.stderr
    database = (folder / "data" / "parley.db").resolve()
    assert database.exists()
    assert not list(elsewhere.iterdir()), "nothing may be created in the current directory"
    assert f"parley: database sqlite:///{database} (config {config})" in created.stderr

    # the same file from its own folder, through $PARLEY_CONFIG: the same database
    listed = run_cli(["groups", "list"], folder, env={"PARLEY_CONFIG": "parley.yaml"})
    assert listed.returncode == 0, listed.stderr
    assert "\tteam\t" in listed.stdout
    assert f"database sqlite:///{database} (config parley.yaml)" in listed.stderr


def test_every_admin_command_names_its_database_on_stderr(tmp_path: Path) -> None:
    commands = [
        ["db", "upgrade"],
        ["groups", "create", "team"],
        ["groups", "update", "team", "--rpm", "5"],
        ["groups", "list"],
        ["keys", "create", "--group", "team"],
        ["keys", "list"],
        ["keys", "revoke", "1"],
        ["usage", "prune"],
    ]
    database = (tmp_path / "parley.db").resolve()
    for command in commands:
        done = run_cli(command, tmp_path)
        assert done.returncode == 0, (command, done.stderr)
        assert f"parley: database sqlite:///{database} (no config file)" in done.stderr, command


def test_a_key_for_an_unknown_group_lists_the_groups_that_exist(tmp_path: Path) -> None:
    none_yet = run_cli(["keys", "create", "--group", "team"], tmp_path)
    assert none_yet.returncode != 0
    assert "No group named 'team'" in none_yet.stderr
    assert "There are no groups yet" in none_yet.stderr
    assert none_yet.stdout == ""

    run_ok(["groups", "create", "alpha"], tmp_path)
    run_ok(["groups", "create", "beta"], tmp_path)
    refused = run_cli(["keys", "create", "--group", "team"], tmp_path)
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr
    assert "No group named 'team'. The groups are: alpha, beta." in refused.stderr
    assert refused.stdout == ""


def test_admin_commands_need_no_channel_secrets_but_serve_names_them_all(
    tmp_path: Path,
) -> None:
    folder = _config_dir(tmp_path)
    config = folder / "parley.yaml"
    run_ok(["groups", "create", "team"], folder, config=config)
    key = run_ok(["keys", "create", "--group", "team"], folder, config=config).strip()
    assert key.startswith("pk-")
    run_ok(["db", "upgrade"], folder, config=config)

    served = run_cli(["serve", "--port", str(free_port())], folder, config=config, timeout=20)
    assert served.returncode != 0
    lines = served.stderr.strip().splitlines()
    assert len(lines) == 1, served.stderr
    assert "2 environment variables are not set" in lines[0]
    assert "PARLEY_TEST_UNSET_ADMIN_TOKEN (admin.token)" in lines[0]
    assert "PARLEY_TEST_UNSET_OPENAI_KEY (channels[0].api_key)" in lines[0]


def test_an_unset_database_variable_still_stops_admin_commands(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "parley.yaml",
        {"database": {"url": "postgresql://parley:${PARLEY_TEST_UNSET_PGPASSWORD}@db/parley"}},
    )
    done = run_cli(["groups", "list"], tmp_path, config=config)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"parley: {config}: database.url: environment variable "
        "PARLEY_TEST_UNSET_PGPASSWORD is not set"
    ]


HEAVY = ("sqlalchemy", "alembic", "aiohttp", "mako", "redis")

LOADED_AFTER = f"""
import sys
from parley.cli import cli
try:
    cli(sys.argv[1:], prog_name="parley")
except SystemExit:
    pass
heavy = sorted({{name.split(".")[0] for name in sys.modules}} & set({HEAVY!r}))
print("loaded:" + ",".join(heavy), file=sys.stderr)
"""


def _heavy_modules_after(args: list[str], cwd: Path) -> set[str]:
    """Which heavy packages a CLI command loaded (the last stderr line of the run)."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED_AFTER, *args],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    (loaded,) = [line for line in done.stderr.splitlines() if line.startswith("loaded:")]
    return {name for name in loaded.removeprefix("loaded:").split(",") if name}


def test_help_and_admin_commands_load_only_what_they_use(tmp_path: Path) -> None:
    assert _heavy_modules_after(["--help"], tmp_path) == set()
    assert _heavy_modules_after(["keys", "--help"], tmp_path) == set()
    run_ok(["db", "upgrade"], tmp_path)
    # an up-to-date database: no Alembic and no web stack; listing groups is the plain
    # SQLite layer's work (store/sqlite_serving.py), listing keys loads SQLAlchemy's store
    assert _heavy_modules_after(["groups", "list"], tmp_path) == set()
    assert _heavy_modules_after(["keys", "list"], tmp_path) == {"sqlalchemy"}
    # serve with a bad config fails before it loads the store or the web stack
    (tmp_path / "bad.yaml").write_text("surprise: 1\n")
    assert _heavy_modules_after(["serve", "--config", "bad.yaml"], tmp_path) == set()
