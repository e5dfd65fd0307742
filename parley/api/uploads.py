"""Reading a ``multipart/form-data`` upload: text fields in memory, the file spooled.

Every upload (transcriptions, translations, voice clones, image edits) is read here,
with the same caps: at most ``MAX_FIELDS`` parts, ``MAX_FIELD_BYTES`` a text field, the
file under the caller's cap; another content type is a 415. An image edit's files
(``read_files``: several images and a mask, each under its cap and at most so many) are
read into memory, since every provider is sent them whole (base64 in JSON, or a
multipart body); the whole body is bounded by ``server.max_body_bytes`` besides. A
single file is read in pieces into a ``SpooledTemporaryFile`` (kept in memory up to
``SPOOL_BYTES``, on disk past it) and counted as it arrives: past the configured cap the
call is refused with 413 naming the limit, before the rest is read. It is later sent on
from that spool, so an upload is never held twice in memory.
"""

from __future__ import annotations

import io
import tempfile
from dataclasses import dataclass, field
from typing import IO

from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError
from multidict import MultiDict

from parley.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType

SPOOL_BYTES = 1024 * 1024
PIECE_BYTES = 64 * 1024
MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 100


@dataclass
class Form:
    """A form's text fields (under the names they were sent with) and its file, if any,
    with the name it was sent under."""

    fields: MultiDict[str] = field(default_factory=MultiDict)
    file: IO[bytes] | None = None
    file_field: str | None = None
    size: int = 0

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


@dataclass
class Files:
    """A form's text fields and its files in the order sent, each as (field, bytes)."""

    fields: MultiDict[str] = field(default_factory=MultiDict)
    files: list[tuple[str, bytes]] = field(default_factory=list)


async def read_files(
    request: web.Request,
    file_fields: tuple[str, ...],
    max_file_bytes: int,
    max_files: int,
    max_total_bytes: int,
) -> Files:
    """The multipart form of ``request`` with files under ``file_fields`` (several under
    one name allowed): 415 for another content type, 413 for a file over
    ``max_file_bytes`` or files over ``max_total_bytes`` together, 400 for more than
    ``max_files`` files or a malformed body."""
    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaType(
            f"Unsupported Content-Type `{request.content_type}`; send multipart/form-data."
        )
    form = Files()
    try:
        reader = await request.multipart()
        count = 0
        while (part := await reader.next()) is not None:
            count += 1
            if count > MAX_FIELDS or not isinstance(part, BodyPartReader):
                raise InvalidRequest("The form has too many or nested parts.")
            name = part.name or ""
            if name in file_fields:
                if len(form.files) >= max_files:
                    message = f"The form carries more than {max_files} files."
                    raise InvalidRequest(message, param=name)
                buffer = io.BytesIO()
                left = max_total_bytes - sum(len(data) for _, data in form.files)
                if left < max_file_bytes:
                    await _spool(part, buffer, left, name, what="set of images")
                else:
                    await _spool(part, buffer, max_file_bytes, name, what="image")
                form.files.append((name, buffer.getvalue()))
            elif part.filename is None:
                form.fields.add(name, await _text(part, name))
            else:
                await part.release()  # another file: not ours to read
    except (ValueError, HttpProcessingError):  # aiohttp's words for a malformed body
        raise InvalidRequest("The multipart body could not be read.") from None
    return form


async def read_form(
    request: web.Request, max_file_bytes: int, file_fields: tuple[str, ...] = ("file",)
) -> Form:
    """The multipart form of ``request``, its file sent under one of ``file_fields``; 415
    for another content type, 413 for a file over ``max_file_bytes``, 400 for a malformed
    body, too many parts or two files. The caller closes the form."""
    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaType(
            f"Unsupported Content-Type `{request.content_type}`; send multipart/form-data."
        )
    form = Form()
    try:
        await _read_parts(await request.multipart(), form, max_file_bytes, file_fields)
    except (ValueError, HttpProcessingError):  # aiohttp's words for a malformed body
        form.close()
        raise InvalidRequest("The multipart body could not be read.") from None
    except BaseException:
        form.close()
        raise
    return form


async def _read_parts(
    reader: MultipartReader, form: Form, max_file_bytes: int, file_fields: tuple[str, ...]
) -> None:
    count = 0
    while (part := await reader.next()) is not None:
        count += 1
        if count > MAX_FIELDS or not isinstance(part, BodyPartReader):
            raise InvalidRequest("The form has too many or nested parts.")
        name = part.name or ""
        if name in file_fields:
            if form.file is not None:
                raise InvalidRequest("The form carries more than one file.", param=name)
            form.file = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
            form.file_field = name
            form.size = await _spool(part, form.file, max_file_bytes, name)
        elif part.filename is None:
            form.fields.add(name, await _text(part, name))
        else:
            await part.release()  # another file: not ours to read


async def _spool(
    part: BodyPartReader, file: IO[bytes], limit: int, name: str, what: str = "audio file"
) -> int:
    size = 0
    while piece := await part.read_chunk(PIECE_BYTES):
        size += len(piece)
        if size > limit:
            raise PayloadTooLarge(
                f"The {what} is too large: the limit is {limit} bytes "
                f"({limit / 1_048_576:.1f} MiB). Send a shorter or more compressed file.",
                param=name,
            )
        file.write(piece)
    file.seek(0)
    return size


async def _text(part: BodyPartReader, name: str) -> str:
    pieces: list[bytes] = []
    size = 0
    while piece := await part.read_chunk(PIECE_BYTES):
        size += len(piece)
        if size > MAX_FIELD_BYTES:
            raise InvalidRequest(
                f"The form field '{name}' is longer than {MAX_FIELD_BYTES} bytes.", param=name
            )
        pieces.append(piece)
    try:
        return b"".join(pieces).decode(part.get_charset(default="utf-8"))
    except (UnicodeDecodeError, LookupError):
        raise InvalidRequest(f"The form field '{name}' is not valid text.", param=name) from None
