"""A ``multipart/form-data`` request body streamed from a file, for uploads to an upstream.

The file is read in pieces as the connection can take them (``HttpClient.send`` waits
for the socket to drain between pieces), so an upload held in a spooled temporary file
is never copied whole into memory again. The body's length is known before the first
byte (text fields and part headers are small and rendered up front), so it is framed by
``Content-Length`` like every other request. ``pieces`` starts from the file's beginning
each time, so every channel tried (failover) is sent the whole file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

PIECE_BYTES = 64 * 1024
_ESCAPES = str.maketrans({'"': "%22", "\r": "%0D", "\n": "%0A"})


@dataclass(frozen=True, slots=True)
class FilePart:
    """The file of a form: its field name, the name and type it is sent with, its bytes."""

    name: str
    filename: str
    content_type: str
    file: IO[bytes]
    """Seekable; read from its start."""


class MultipartBody:
    """Text fields, then one file or several, as a ``multipart/form-data`` body of known
    length."""

    __slots__ = ("_files", "_size", "_tail", "boundary")

    def __init__(self, fields: Sequence[tuple[str, str]], *files: FilePart) -> None:
        self.boundary = f"parley-{secrets.token_hex(16)}"
        rendered = [self._field(name, value) for name, value in fields]
        self._files: list[tuple[bytes, IO[bytes], int]] = []
        for index, part in enumerate(files):
            head = b"".join(rendered) if index == 0 else b"\r\n"
            head += (
                f"--{self.boundary}\r\n"
                f'Content-Disposition: form-data; name="{_quoted(part.name)}"; '
                f'filename="{_quoted(part.filename)}"\r\n'
                f"Content-Type: {_one_line(part.content_type)}\r\n\r\n".encode()
            )
            size = part.file.seek(0, os.SEEK_END)
            part.file.seek(0)
            self._files.append((head, part.file, size))
        closing = f"--{self.boundary}--\r\n".encode()
        self._tail = b"\r\n" + closing if files else b"".join(rendered) + closing
        self._size = sum(len(head) + size for head, _, size in self._files)

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    @property
    def length(self) -> int:
        return self._size + len(self._tail)

    def pieces(self) -> Iterator[bytes]:
        """The body, in pieces of at most ``PIECE_BYTES`` of each file."""
        for head, file, size in self._files:
            yield head
            file.seek(0)
            left = size
            while left > 0:
                piece = file.read(min(PIECE_BYTES, left))
                if not piece:
                    raise ValueError("the file to upload got shorter while it was being sent")
                left -= len(piece)
                yield piece
        yield self._tail

    def _field(self, name: str, value: str) -> bytes:
        return (
            f"--{self.boundary}\r\n"
            f'Content-Disposition: form-data; name="{_quoted(name)}"\r\n\r\n'
            f"{value}\r\n"
        ).encode()


def _quoted(text: str) -> str:
    """A name inside a quoted header parameter: quotes and line breaks percent-encoded,
    as browsers and httpx send them."""
    return text.translate(_ESCAPES)


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")
