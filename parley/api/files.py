"""The files API: ``POST /v1/files``, ``GET /v1/files``, ``GET /v1/files/{id}``,
``GET /v1/files/{id}/content`` and ``DELETE /v1/files/{id}``, in OpenAI's shapes.

A file belongs to the caller's group: another group's id is a 404 worded as for an id
that never existed. These calls are not model calls: nothing is routed or metered, but
each is counted against the group's and key's request rates (``admit.take_request``) and
refused as a model call would be. An upload streams to where the deployment keeps files
(``runtime/file_bytes.py``) as it arrives, counted against ``files.max_file_bytes`` and
what the group has left of ``files.max_group_bytes``; its metadata is recorded once its
bytes are whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import orjson
from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from parley.api.uploads import text_field
from parley.domain.files import (
    MAX_EXPIRY_SECONDS,
    MIN_EXPIRY_SECONDS,
    UPLOAD_PURPOSES,
    StoredFile,
    is_file_id,
    new_file_id,
)
from parley.domain.numbers import whole_number
from parley.errors import InvalidRequest, NotFound, PayloadTooLarge, UnsupportedMediaType
from parley.pipeline.admit import take_request
from parley.pipeline.context import REPLY_HEADERS, caller, services
from parley.pipeline.services import Services
from parley.pipeline.started import note_started

MAX_PAGE = 10_000
PIECE_BYTES = 64 * 1024
MAX_FILENAME = 255
MAX_PARTS = 20


async def create_file(request: web.Request) -> web.StreamResponse:
    svc = await _counted(request)
    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaType(
            f"Unsupported Content-Type `{request.content_type}`; send multipart/form-data."
        )
    group_id = caller(request).group.id
    room = svc.settings.files.max_group_bytes - await svc.store.group_file_bytes(group_id)
    upload = _Upload(svc, new_file_id(), room)
    try:
        await upload.read(await request.multipart())
    except (ValueError, HttpProcessingError):  # aiohttp's words for a malformed body
        await upload.discard()
        raise InvalidRequest("The multipart body could not be read.") from None
    except BaseException:
        await upload.discard()
        raise
    stored = await upload.record(group_id)
    return _json(stored.as_object())


async def list_files(request: web.Request) -> web.StreamResponse:
    """``limit`` (1 to 10,000, default 10,000), ``order`` (``desc``, the default, or
    ``asc``), ``after`` (a file id) and ``purpose``."""
    svc = await _counted(request)
    query = request.query
    limit = page_limit(query.get("limit"), MAX_PAGE, MAX_PAGE)
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("'order' must be 'asc' or 'desc'.", param="order")
    after = query.get("after")
    if after is not None and not is_file_id(after):
        raise InvalidRequest("'after' must be a file id.", param="after")
    page = await svc.store.list_files(
        caller(request).group.id,
        limit=limit,
        after=after,
        ascending=order == "asc",
        purpose=query.get("purpose"),
    )
    data = [stored.as_object() for stored in page.files]
    return _json(
        {
            "object": "list",
            "data": data,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
            "has_more": page.has_more,
        }
    )


async def retrieve_file(request: web.Request) -> web.StreamResponse:
    svc = await _counted(request)
    return _json((await _find(request, svc)).as_object())


async def file_content(request: web.Request) -> web.StreamResponse:
    """The file's bytes, streamed from where they are kept."""
    svc = await _counted(request)
    stored = await _find(request, svc)
    reply_headers = request[REPLY_HEADERS]
    headers = dict(reply_headers)
    headers["Content-Type"] = "application/octet-stream"
    headers["Content-Disposition"] = f'attachment; filename="{_quoted(stored.filename)}"'
    response = web.StreamResponse(headers=headers)
    response.content_length = stored.bytes
    pieces = svc.file_bytes.read(stored.id)
    first = await anext(pieces, b"")  # a missing file fails here, before the head is sent
    note_started(request, response)
    await response.prepare(request)
    await response.write(first)
    async for piece in pieces:
        await response.write(piece)
    await response.write_eof()
    return response


async def delete_file(request: web.Request) -> web.StreamResponse:
    svc = await _counted(request)
    file_id = request.match_info["file_id"]
    group_id = caller(request).group.id
    if not is_file_id(file_id) or not await svc.store.delete_file(file_id, group_id):
        raise missing_file(file_id)
    await svc.file_bytes.delete(file_id)
    return _json({"id": file_id, "object": "file", "deleted": True})


def missing_file(file_id: str) -> NotFound:
    return NotFound(f"No such File object: {file_id}", param="id")


def page_limit(value: str | None, most: int, default: int) -> int:
    if value is None:
        return default
    number = whole_number(value, 1, most)
    if number is None:
        raise InvalidRequest(f"'limit' must be an integer from 1 to {most}.", param="limit")
    return number


async def _counted(request: web.Request) -> Services:
    """The services, once the call is counted against the caller's request rates."""
    svc = services(request)
    request[REPLY_HEADERS] = await take_request(svc.limiter, caller(request))
    return svc


async def _find(request: web.Request, svc: Services) -> StoredFile:
    file_id = request.match_info["file_id"]
    found = None
    if is_file_id(file_id):
        found = await svc.store.find_file(file_id, caller(request).group.id)
    if found is None:
        raise missing_file(file_id)
    return found


def _json(body: object) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _quoted(filename: str) -> str:
    return "".join(c for c in filename if c.isprintable() and c not in '"\\')


class _Upload:
    """One upload being read: its text fields, and its file streamed to the keeper."""

    def __init__(self, svc: Services, file_id: str, room: int) -> None:
        self._svc = svc
        self.file_id = file_id
        self._room = room
        self._fields: dict[str, str] = {}
        self._filename: str | None = None
        self._size = 0
        self._written = False

    async def read(self, reader: MultipartReader) -> None:
        count = 0
        while (part := await reader.next()) is not None:
            count += 1
            if count > MAX_PARTS or not isinstance(part, BodyPartReader):
                raise InvalidRequest("The form has too many or nested parts.")
            name = part.name or ""
            if name == "file":
                if self._filename is not None:
                    raise InvalidRequest("The form carries more than one file.", param="file")
                self._filename = (part.filename or "upload")[:MAX_FILENAME]
                self._written = True
                self._size = await self._svc.file_bytes.write(self.file_id, self._pieces(part))
            elif part.filename is None:
                self._fields[name] = await text_field(part, name)
            else:
                await part.release()

    async def _pieces(self, part: BodyPartReader) -> AsyncIterator[bytes]:
        limits = self._svc.settings.files
        size = 0
        while piece := await part.read_chunk(PIECE_BYTES):
            size += len(piece)
            if size > limits.max_file_bytes:
                raise PayloadTooLarge(
                    f"The file is too large: the limit is {limits.max_file_bytes} bytes.",
                    param="file",
                )
            if size > self._room:
                raise PayloadTooLarge(
                    "Your group's files would hold more than its limit of "
                    f"{limits.max_group_bytes} bytes; delete some files first.",
                    param="file",
                )
            yield piece

    async def record(self, group_id: int) -> StoredFile:
        """The file, recorded once its fields are checked (its bytes removed if not)."""
        try:
            stored = StoredFile(
                id=self.file_id,
                group_id=group_id,
                filename=self._checked_filename(),
                purpose=self._purpose(),
                bytes=self._size,
                created_at=datetime.now(UTC),
                expires_at=self._expiry(),
            )
            await self._svc.store.add_file(stored)
        except BaseException:
            await self.discard()
            raise
        return stored

    async def discard(self) -> None:
        if self._written:
            await self._svc.file_bytes.delete(self.file_id)

    def _checked_filename(self) -> str:
        if self._filename is None:
            raise InvalidRequest("The form carries no 'file'.", param="file")
        return self._filename

    def _purpose(self) -> str:
        purpose = self._fields.get("purpose")
        if purpose is None:
            raise InvalidRequest("The form carries no 'purpose'.", param="purpose")
        if purpose not in UPLOAD_PURPOSES:
            raise InvalidRequest(
                f"'purpose' must be one of {', '.join(UPLOAD_PURPOSES)}.", param="purpose"
            )
        return purpose

    def _expiry(self) -> datetime | None:
        anchor = self._fields.get("expires_after[anchor]")
        seconds = self._fields.get("expires_after[seconds]")
        if anchor is None and seconds is None:
            return None
        if anchor != "created_at":
            raise InvalidRequest(
                "'expires_after[anchor]' must be 'created_at'.", param="expires_after.anchor"
            )
        if seconds is None or not seconds.isdecimal():
            raise InvalidRequest(
                "'expires_after[seconds]' must be an integer.", param="expires_after.seconds"
            )
        if whole_number(seconds, MIN_EXPIRY_SECONDS, MAX_EXPIRY_SECONDS) is None:
            raise InvalidRequest(
                f"'expires_after[seconds]' must be from {MIN_EXPIRY_SECONDS} to "
                f"{MAX_EXPIRY_SECONDS}.",
                param="expires_after.seconds",
            )
        return datetime.now(UTC) + timedelta(seconds=int(seconds))
