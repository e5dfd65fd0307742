"""A batch's input file, line by line: checked before the batch is accepted, and each
line made into the job an interactive call of its endpoint would be.

A line is OpenAI's ``BatchRequestInput``: ``{"custom_id", "method": "POST", "url",
"body"}``. The file is read piece by piece (never whole in memory) and every line is
checked: JSON, a unique ``custom_id``, ``POST`` to the batch's endpoint, a body its
endpoint accepts (not streamed), and a model the group and the key may use for it.
Each problem names its line number (from 1).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import orjson

from parley.api.apart import read_chat, read_messages
from parley.api.body import decode_json
from parley.api.chat import CHAT, ChatReply
from parley.api.chat_request import parse_chat
from parley.api.completions import (
    COMPLETIONS,
    CompletionReply,
    parse_completion,
    read_completion,
)
from parley.api.embeddings import EMBEDDINGS, embedding_job, parse_embeddings
from parley.api.messages import MessagesReply
from parley.api.messages_request import parse_messages
from parley.api.responses import RESPONSES, ResponsesReply
from parley.api.responses_apart import read_responses
from parley.domain.batches import MESSAGES_ENDPOINT, LineError
from parley.errors import InvalidRequest, ParleyError
from parley.pipeline.admit import resolve_model
from parley.pipeline.authenticate import Caller
from parley.pipeline.job import ReplyJob
from parley.pipeline.services import Services

MAX_LINE_BYTES = 10 * 1024 * 1024
"""The longest line of an input file."""
MAX_ERRORS = 100
"""The most problems a refused input file reports."""

OPERATIONS = {
    "/v1/chat/completions": CHAT,
    "/v1/completions": COMPLETIONS,
    "/v1/embeddings": EMBEDDINGS,
    "/v1/responses": RESPONSES,
}


async def split_lines(pieces: AsyncIterable[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """Each line of a file read in pieces, numbered from 1, without its line end; blank
    lines are skipped (they are counted). A line longer than ``MAX_LINE_BYTES`` is
    refused."""
    pending = b""
    number = 0
    async for piece in pieces:
        pending += piece
        *whole, pending = pending.split(b"\n")
        for line in whole:
            number += 1
            if line.strip():
                yield number, line.rstrip(b"\r")
        if len(pending) > MAX_LINE_BYTES:
            raise InvalidRequest(
                f"Line {number + 1} of the input file is longer than {MAX_LINE_BYTES} bytes.",
                param="input_file_id",
            )
    if pending.strip():
        yield number + 1, pending.rstrip(b"\r")


class LineChecker:
    """Checks the lines of one input file for a batch of ``endpoint`` by ``caller``."""

    def __init__(self, endpoint: str, caller: Caller, svc: Services) -> None:
        self._endpoint = endpoint
        self._operation = OPERATIONS[endpoint]
        self._caller = caller
        self._svc = svc
        self._custom_ids: set[str] = set()
        self.errors: list[LineError] = []

    def check(self, number: int, raw: bytes) -> tuple[str, str] | None:
        """The line's ``custom_id`` and body (as JSON text), or ``None`` with its problem
        added to ``errors``."""
        try:
            return self._checked(number, raw)
        except _LineProblem as problem:
            if len(self.errors) < MAX_ERRORS:
                self.errors.append(problem.error)
            return None

    def _checked(self, number: int, raw: bytes) -> tuple[str, str]:
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _LineProblem(
                "invalid_json_line", "This line is not valid JSON.", number
            ) from None
        if not isinstance(line, dict):
            raise _LineProblem("invalid_json_line", "This line is not a JSON object.", number)
        custom_id = line.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id or len(custom_id) > 200:
            raise _LineProblem(
                "missing_required_parameter",
                "'custom_id' must be a string of 1 to 200 characters.",
                number,
                "custom_id",
            )
        if custom_id in self._custom_ids:
            raise _LineProblem(
                "duplicate_custom_id",
                f"The custom_id '{custom_id}' is used by an earlier line.",
                number,
                "custom_id",
            )
        self._custom_ids.add(custom_id)
        if line.get("method") != "POST":
            raise _LineProblem("invalid_method", "'method' must be 'POST'.", number, "method")
        if line.get("url") != self._endpoint:
            raise _LineProblem(
                "mismatched_endpoint",
                f"'url' must be the batch's endpoint, '{self._endpoint}'.",
                number,
                "url",
            )
        body = line.get("body")
        if not isinstance(body, dict):
            raise _LineProblem("invalid_request", "'body' must be a JSON object.", number, "body")
        text = orjson.dumps(body)
        try:
            self._check_body(body, len(text))
        except ParleyError as error:
            raise _LineProblem(error.code or "invalid_request", error.message, number) from None
        return custom_id, text.decode()

    def _check_body(self, body: dict[str, Any], size: int) -> None:
        if body.get("stream"):
            raise InvalidRequest("A batch line cannot be streamed: leave out 'stream'.")
        if self._endpoint == "/v1/chat/completions":
            parse_chat(body, size)
        elif self._endpoint == "/v1/completions":
            parse_completion(body, size)
        elif self._endpoint == "/v1/embeddings":
            parse_embeddings(body)
        model = body.get("model")
        if not isinstance(model, str):
            raise InvalidRequest("'model' must be a string.", param="model")
        operation = self._operation
        resolve_model(self._svc.models, self._caller, model, operation.kinds, operation.name)


class _LineProblem(Exception):
    def __init__(self, code: str, message: str, line: int, param: str | None = None) -> None:
        super().__init__(message)
        self.error = LineError(code, message, line, param)


async def line_job(endpoint: str, body: str, svc: Services, group_id: int) -> ReplyJob[Any]:
    """The job an interactive call of ``endpoint`` with this body would be (400 for a
    body the endpoint refuses)."""
    raw = body.encode()
    if endpoint == "/v1/responses":
        large = svc.settings.server.large_body_bytes
        parsed = await read_responses(raw, group_id, svc.bodies, large, svc.responses)
        if parsed.stream:
            raise InvalidRequest("A batch line cannot be streamed: leave out 'stream'.")
        default_max = svc.settings.limits.default_max_tokens
        return ResponsesReply(parsed, svc.providers, svc.router, None, default_max)
    large = svc.settings.server.large_body_bytes
    if endpoint == MESSAGES_ENDPOINT:
        if len(raw) > large:  # read, and translated, in a body process
            messages, apart = await read_messages(raw, group_id, svc.bodies, None)
            return MessagesReply(messages, svc.providers, apart)
        return MessagesReply(parse_messages(decode_json(raw), None, len(raw)), svc.providers)
    if endpoint == "/v1/chat/completions":
        if len(raw) > large:  # read, and translated, in a body process
            max_image = svc.settings.server.max_image_bytes
            text, images, apart = await read_chat(raw, group_id, svc.bodies, max_image)
            return ChatReply(text, svc, images, apart)
        return ChatReply(parse_chat(decode_json(raw), len(raw)), svc, None, None)
    if endpoint == "/v1/completions":
        return CompletionReply(await read_completion(raw, group_id, svc.bodies, large), svc)
    return await embedding_job(raw, svc.providers, group_id, svc.bodies, large)
