"""An uploaded file (``/v1/files``), as the store keeps its metadata.

A file belongs to one group: another group's id is, to a caller, one that does not
exist. Its bytes are kept apart from its metadata (``runtime/file_bytes.py``: a folder
beside a SQLite database, chunks in PostgreSQL). Ids are ``file-`` and 24 hex digits,
the first 12 the creation time in milliseconds, so ordering by id is ordering by
creation and a page's ``after`` is a plain comparison.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

UPLOAD_PURPOSES = ("batch", "user_data")
"""What a caller may upload a file for."""
BATCH_OUTPUT = "batch_output"
"""The purpose of the output and error files a batch writes."""
FILE_ID = re.compile(r"file-[0-9a-f]{24}")
MIN_EXPIRY_SECONDS = 3600
MAX_EXPIRY_SECONDS = 2_592_000


def new_file_id() -> str:
    """``file-`` and the creation time in milliseconds (12 hex), then 12 random hex."""
    return f"file-{int(time.time() * 1000):012x}{secrets.token_hex(6)}"


def is_file_id(text: str) -> bool:
    """Whether ``text`` can be a file's id: anything else is unknown without asking the
    store (and can never name a path outside the file folder)."""
    return FILE_ID.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class StoredFile:
    id: str
    group_id: int
    filename: str
    purpose: str
    bytes: int
    created_at: datetime
    expires_at: datetime | None = None

    def as_object(self) -> dict[str, Any]:
        """OpenAI's file object."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.bytes,
            "created_at": int(self.created_at.timestamp()),
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None if self.expires_at is None else int(self.expires_at.timestamp()),
            "status_details": None,
        }


@dataclass(frozen=True, slots=True)
class FilePage:
    """One page of a group's files, and whether more follow."""

    files: list[StoredFile]
    has_more: bool
