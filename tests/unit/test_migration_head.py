"""A database already at the newest migration is opened without loading Alembic (about
8 MB of every worker's memory), and the newest revision read from the files is Alembic's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory

from parley.store.engine import MIGRATIONS, head_revision

REPO = Path(__file__).resolve().parents[2]
MIGRATE_TWICE = """
import asyncio, sys
from parley.store.sql import open_store

async def migrate(url):
    store = await open_store(url)
    try:
        await store.migrate()
    finally:
        await store.close()

url = sys.argv[1]
asyncio.run(migrate(url))
print("alembic" in sys.modules)
"""


def test_the_head_read_from_the_files_is_alembics() -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert head_revision() == ScriptDirectory.from_config(config).get_current_head()


def test_two_heads_or_none_give_no_head(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('revision: str = "a"\ndown_revision: str | None = None\n')
    (tmp_path / "b.py").write_text('revision = "b"\ndown_revision = "a"\n')
    assert head_revision(tmp_path) == "b"
    (tmp_path / "c.py").write_text('revision = "c"\ndown_revision = "a"\n')
    assert head_revision(tmp_path) is None
    assert head_revision(tmp_path / "missing") is None


def test_a_database_at_head_is_opened_without_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'parley.db'}"
    runs = [
        subprocess.run(
            [sys.executable, "-c", MIGRATE_TWICE, url],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs == [["True"], ["False"]]  # the first run migrated; the second had no need
