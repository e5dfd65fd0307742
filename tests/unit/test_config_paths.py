"""Where the database is, wherever a command runs; every unset variable named at once;
the migration head read without Alembic matches Alembic's."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from parley.settings import ConfigError, anchored_database_url, load_settings, sqlite_path
from parley.store.engine import MIGRATIONS, head_revision


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "parley.yaml"
    path.write_text(text)
    return path


def test_a_relative_sqlite_path_in_the_file_is_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = write(tmp_path / "etc", "database: {url: 'sqlite:///./data/parley.db?timeout=3'}")
    settings = load_settings(Path("etc/parley.yaml"), {})
    expected = (tmp_path / "etc" / "data" / "parley.db").resolve()
    assert settings.database.url == f"sqlite:///{expected}?timeout=3"
    assert config.exists()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////var/lib/parley/parley.db",
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///file:mem1?mode=memory&uri=true",
        "postgresql://parley@db:5432/parley",
    ],
)
def test_absolute_memory_and_server_urls_are_kept(tmp_path: Path, url: str) -> None:
    assert anchored_database_url(url, tmp_path) == url


def test_an_environment_override_stays_relative_to_the_current_directory(
    tmp_path: Path,
) -> None:
    config = write(tmp_path, "database: {url: 'sqlite:///a.db'}")
    settings = load_settings(config, {"PARLEY_DATABASE_URL": "sqlite:///b.db"})
    assert settings.database.url == "sqlite:///b.db"
    assert sqlite_path(settings.database.url) == "b.db"


SECRETS = """
database: {url: 'postgresql://parley:${PGPASSWORD}@db/parley'}
admin: {token: '${ADMIN_TOKEN}'}
channels:
  - {name: a, base_url: 'https://x', api_key: '${KEY_A}', models: [chat]}
  - {name: b, base_url: 'https://y', api_key: '${KEY_B}', models: [chat]}
models: [{name: chat}]
"""


def test_serve_needs_every_variable_and_names_them_all_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as problem:
        load_settings(write(tmp_path, SECRETS), {"PGPASSWORD": "pw"})
    message = str(problem.value)
    assert "\n" not in message
    assert "3 environment variables are not set" in message
    for part in ("ADMIN_TOKEN (admin.token)", "KEY_A (channels[0].api_key)", "KEY_B (channels"):
        assert part in message


def test_admin_commands_need_only_the_database_variables(tmp_path: Path) -> None:
    path = write(tmp_path, SECRETS)
    settings = load_settings(path, {"PGPASSWORD": "pw"}, secrets=False)
    assert settings.database.url == "postgresql://parley:pw@db/parley"
    assert settings.channels[0].api_key == "${KEY_A}"  # never used by an admin command
    with pytest.raises(ConfigError, match=r"database\.url: environment variable PGPASSWORD"):
        load_settings(path, {}, secrets=False)


def test_the_head_read_from_the_scripts_is_alembics_head() -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert head_revision() == ScriptDirectory.from_config(config).get_current_head()


def test_a_branched_history_leaves_the_decision_to_alembic(tmp_path: Path) -> None:
    for name, revision, parent in [("a", "1", None), ("b", "2", "1"), ("c", "3", "1")]:
        down = f'"{parent}"' if parent else "None"
        (tmp_path / f"{name}.py").write_text(f'revision = "{revision}"\ndown_revision = {down}\n')
    assert head_revision(tmp_path) is None
    (tmp_path / "c.py").unlink()
    assert head_revision(tmp_path) == "2"


def test_a_file_without_a_database_keeps_the_default_database_next_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "etc", "server: {port: 9000}")
    settings = load_settings(Path("etc/parley.yaml"), {})
    assert settings.database.url == f"sqlite:///{(tmp_path / 'etc' / 'parley.db').resolve()}"
    assert load_settings(None, {}).database.url == "sqlite:///./parley.db"


def test_a_relative_files_folder_is_relative_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "etc", "files: {folder: ./uploads}\n")
    settings = load_settings(Path("etc/parley.yaml"), {})
    assert settings.files.folder == str((tmp_path / "etc" / "uploads").resolve())
