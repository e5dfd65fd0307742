"""A fake image engine speaking OpenAI's Images API, over real HTTP, written from OpenAI's
API reference (``POST /v1/images/generations``, ``POST /v1/images/edits``; the
``ImagesResponse`` object; the ``image_generation.*`` and ``image_edit.*`` stream events)
and Azure OpenAI's (the same operations under ``/openai/deployments/{deployment}/images/...
?api-version=`` or ``/openai/v1/images/...``, the key in ``api-key``).

    async with FakeImages(api_key="k") as engine:
        engine.base_url        # "http://127.0.0.1:<port>/v1", an OpenAI channel's base_url
        engine.endpoint        # "http://127.0.0.1:<port>", an Azure channel's base_url
        engine.requests        # every request (ReceivedRequest), oldest first
        engine.uploads         # per edit: [(field, filename, content type, bytes)]

A request must carry ``Authorization: Bearer <key>`` or ``api-key: <key>`` (else a 401
envelope). Generations are JSON; edits ``multipart/form-data`` with ``image`` (or
``image[]``, several) and an optional ``mask``, each a PNG, JPEG or WebP (else a 400, as
OpenAI answers ``invalid_image_format``).

Models behave as OpenAI's do, by the name's first part:

- ``dall-e-*``: ``n`` images returned as ``url`` unless ``response_format: b64_json``
  (DALL·E's default); each URL is this fake's ``/files/{id}?sig=<secret>`` (a signed URL,
  ``SIGNATURE``), and ``GET`` on it serves the PNG. ``dall-e-3`` adds ``revised_prompt``.
  No ``usage``.
- ``gpt-image-*``: ``b64_json`` always; a ``response_format`` field is a 400 (GPT image
  models refuse it); ``usage`` reported: input tokens are the prompt's words (text) and
  ``IMAGE_INPUT_TOKENS`` per uploaded image or mask, output tokens ``OUTPUT_TOKENS`` by
  quality for 1024x1024, times ``n``. The reply echoes ``size``, ``quality``,
  ``background`` and ``output_format`` (``auto`` becomes ``1024x1024``/``medium``).
  ``stream: true`` sends ``partial_images`` partial events (each ``event:`` named), then
  one ``completed`` event per image with its share of the usage (input tokens on the
  first), and no ``[DONE]``.

Knobs, as ``+``-separated parts of the model name: ``fail-N`` (status N, OpenAI's
envelope), ``html`` (the image bytes are an HTML page, not an image), ``no-usage``,
``usage-inflated`` (reports ``INFLATED`` output tokens), ``error-after-N`` (a stream
sends N partial images, then an error event), ``cut-N`` (a stream ends after N partial
images, with no completed event), ``leak`` (a ``fail-N`` envelope quotes the caller's
credentials).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import BodyPartReader, web

from tests.upstreams.server import FakeServer, json_reply, openai_error, received

SIGNATURE = "sig-secret-upstream-0123456789"
IMAGE_INPUT_TOKENS = 65
OUTPUT_TOKENS = {"low": 272, "medium": 1056, "high": 4160}
INFLATED = 999_999_999
Fields = dict[str, Any]
Upload = tuple[str, str, str, bytes]
"""A file an edit sent: its field, file name, content type and bytes."""
API_VERSIONS = frozenset({"2024-10-21", "2025-04-01-preview"})
FORMATS = ("png", "jpeg", "webp")


def png(seed: str) -> bytes:
    """A real 2x2 RGB PNG whose colour comes from ``seed``."""
    red, green, blue = hashlib.sha256(seed.encode()).digest()[:3]
    row = b"\0" + bytes([red, green, blue]) * 2
    raw = row * 2

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def is_image(data: bytes) -> bool:
    return (
        data.startswith(b"\x89PNG\r\n\x1a\n")
        or data.startswith(b"\xff\xd8\xff")
        or (data[:4] == b"RIFF" and data[8:12] == b"WEBP")
    )


@dataclass(frozen=True, slots=True)
class Knobs:
    fail: int | None = None
    html: bool = False
    no_usage: bool = False
    inflated: bool = False
    error_after: int | None = None
    cut: int | None = None
    leak: bool = False

    @classmethod
    def of(cls, model: str) -> Knobs:
        values: dict[str, Any] = {}
        for part in model.split("+")[1:]:
            kind, _, arg = part.rpartition("-")
            if part in ("html", "leak"):
                values[part] = True
            elif part == "no-usage":
                values["no_usage"] = True
            elif part == "usage-inflated":
                values["inflated"] = True
            elif kind in ("fail", "cut"):
                values[kind] = int(arg)
            elif kind == "error-after":
                values["error_after"] = int(arg)
        return cls(**values)


@dataclass
class FakeImages(FakeServer):
    api_key: str | None = None
    uploads: list[list[tuple[str, str, str, bytes]]] = field(default_factory=list)
    served_files: list[str] = field(default_factory=list)
    """The signed URLs' ids fetched, oldest first."""
    _files: dict[str, bytes] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def application(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/images/{operation}", self._openai)
        app.router.add_post("/openai/v1/images/{operation}", self._openai)
        app.router.add_post("/openai/deployments/{deployment}/images/{operation}", self._azure)
        app.router.add_get("/files/{file_id}", self._file)
        return app

    async def _azure(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("api-version") not in API_VERSIONS:
            return json_reply(404, {"error": {"code": "404", "message": "Resource not found"}})
        return await self._openai(request, request.match_info["deployment"])

    async def _openai(
        self, request: web.Request, deployment: str | None = None
    ) -> web.StreamResponse:
        operation = request.match_info["operation"]
        if request.content_type == "multipart/form-data":
            fields, files = await self._form(request)
        else:
            fields, files = orjson.loads(await request.read()), []
        self.requests.append(received(request, fields))
        if not self._authorized(request):
            return json_reply(
                401,
                openai_error(
                    "Incorrect API key provided.", "invalid_request_error", code="invalid_api_key"
                ),
            )
        model = deployment or str(fields.get("model", ""))
        knobs = Knobs.of(model)
        if knobs.fail is not None:
            message = f"Fake image failure (status {knobs.fail})."
            if knobs.leak:
                message += f" Your header was {request.headers.get('Authorization')}."
            return json_reply(knobs.fail, openai_error(message, "server_error"))
        if operation == "edits":
            if request.content_type != "multipart/form-data" or not any(
                name in ("image", "image[]") for name, *_ in files
            ):
                return json_reply(
                    400, openai_error("Missing image.", "invalid_request_error", param="image")
                )
            for name, _, _, data in files:
                if not is_image(data):
                    return json_reply(
                        400,
                        openai_error(
                            "Invalid image file.",
                            "invalid_request_error",
                            param=name,
                            code="invalid_image_format",
                        ),
                    )
        elif operation != "generations":
            return json_reply(404, openai_error("Unknown operation.", "invalid_request_error"))
        gpt = model.split("+")[0].startswith("gpt-image")
        if gpt and "response_format" in fields:
            return json_reply(
                400,
                openai_error(
                    "Unknown parameter: 'response_format'.",
                    "invalid_request_error",
                    param="response_format",
                    code="unknown_parameter",
                ),
            )
        if _flag(fields.get("stream")):
            return await self._stream(request, fields, files, knobs, operation)
        return json_reply(200, self._reply(fields, files, knobs, gpt))

    def _authorized(self, request: web.Request) -> bool:
        if self.api_key is None:
            return True
        return self.api_key in (
            request.headers.get("api-key"),
            request.headers.get("Authorization", "").removeprefix("Bearer "),
        )

    async def _form(
        self, request: web.Request
    ) -> tuple[dict[str, Any], list[tuple[str, str, str, bytes]]]:
        fields: dict[str, Any] = {}
        files: list[tuple[str, str, str, bytes]] = []
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            assert isinstance(part, BodyPartReader)
            data = await part.read()
            if part.filename is not None:
                content_type = part.headers.get("Content-Type", "")
                files.append((part.name or "", part.filename, content_type, bytes(data)))
            else:
                fields[part.name or ""] = bytes(data).decode()
        self.uploads.append(files)
        return fields, files

    def _picture(self, fields: dict[str, Any], index: int, knobs: Knobs) -> bytes:
        if knobs.html:
            return b"<html><script>alert(1)</script></html>"
        return png(f"{fields.get('prompt')}#{index}")

    def _usage(
        self, fields: dict[str, Any], files: list[Any], images: int, knobs: Knobs
    ) -> dict[str, Any]:
        text = len(str(fields.get("prompt", "")).split())
        image = IMAGE_INPUT_TOKENS * len(files)
        quality = _made_quality(fields)
        output = INFLATED if knobs.inflated else OUTPUT_TOKENS[quality] * images
        return {
            "input_tokens": text + image,
            "input_tokens_details": {"text_tokens": text, "image_tokens": image},
            "output_tokens": output,
            "total_tokens": text + image + output,
        }

    def _reply(
        self, fields: dict[str, Any], files: list[Any], knobs: Knobs, gpt: bool
    ) -> dict[str, Any]:
        n = int(fields.get("n") or 1)
        data = []
        for index in range(n):
            picture = self._picture(fields, index, knobs)
            if gpt or fields.get("response_format") == "b64_json":
                item: dict[str, Any] = {"b64_json": base64.b64encode(picture).decode()}
            else:
                file_id = f"file-{next(self._ids)}"
                self._files[file_id] = picture
                item = {"url": f"{self.endpoint}/files/{file_id}?sig={SIGNATURE}"}
            if str(fields.get("model", "")).startswith("dall-e-3"):
                item["revised_prompt"] = f"A detailed picture of {fields.get('prompt')}"
            data.append(item)
        reply: dict[str, Any] = {"created": int(time.time()), "data": data}
        if gpt:
            reply.update(_echoed(fields))
            if not knobs.no_usage:
                reply["usage"] = self._usage(fields, files, n, knobs)
        return reply

    async def _stream(
        self,
        request: web.Request,
        fields: dict[str, Any],
        files: list[Any],
        knobs: Knobs,
        operation: str,
    ) -> web.StreamResponse:
        kind = "image_edit" if operation == "edits" else "image_generation"
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        partials = int(fields.get("partial_images") or 0)
        echoed = _echoed(fields)
        for index in range(partials):
            if knobs.error_after is not None and index == knobs.error_after:
                break
            if knobs.cut is not None and index == knobs.cut:
                await response.write_eof()
                return response
            event = {
                "type": f"{kind}.partial_image",
                "b64_json": base64.b64encode(png(f"partial-{index}")).decode(),
                "partial_image_index": index,
                "created_at": int(time.time()),
                **echoed,
            }
            await response.write(_event(event))
        if knobs.error_after is not None:
            error = {
                "type": "error",
                "error": {
                    "message": "Fake stream failure.",
                    "type": "server_error",
                    "code": None,
                    "param": None,
                },
            }
            await response.write(_event(error))
            await response.write_eof()
            return response
        if knobs.cut is not None:
            await response.write_eof()
            return response
        n = int(fields.get("n") or 1)
        for index in range(n):
            event = {
                "type": f"{kind}.completed",
                "b64_json": base64.b64encode(self._picture(fields, index, knobs)).decode(),
                "created_at": int(time.time()),
                **echoed,
            }
            if not knobs.no_usage:
                usage = self._usage(fields, files if index == 0 else [], 1, knobs)
                if index:
                    usage["input_tokens"] = usage["input_tokens_details"]["text_tokens"] = 0
                    usage["total_tokens"] = usage["output_tokens"]
                event["usage"] = usage
            await response.write(_event(event))
        await response.write_eof()
        return response

    async def _file(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        if request.query.get("sig") != SIGNATURE or file_id not in self._files:
            return web.Response(status=403, text="<Error>AuthenticationFailed</Error>")
        if request.headers.get("Authorization") or request.headers.get("api-key"):
            return web.Response(status=400, text="a signed URL takes no credentials")
        self.served_files.append(file_id)
        return web.Response(body=self._files[file_id], content_type="image/png")


def _flag(value: Any) -> bool:
    return value is True or value == "true"


def _made_quality(fields: dict[str, Any]) -> str:
    quality = fields.get("quality") or "auto"
    return quality if quality in OUTPUT_TOKENS else "medium"


def _echoed(fields: dict[str, Any]) -> dict[str, Any]:
    size = fields.get("size") or "auto"
    output_format = fields.get("output_format") or "png"
    return {
        "size": "1024x1024" if size == "auto" else size,
        "quality": _made_quality(fields),
        "background": fields.get("background") or "opaque",
        "output_format": output_format if output_format in FORMATS else "png",
    }


def _event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: ".encode() + orjson.dumps(payload) + b"\n\n"
