"""What a batch line's end looks like in its batch's API: OpenAI's ``BatchRequestOutput``
lines for ``/v1/batches`` (collected into an output and an error file when the batch
ends), Anthropic's ``{custom_id, result}`` lines for ``/v1/messages/batches`` (served as
they are by the batch's ``results``).

Each end is ``(line, state, result)``: the line's number, the state it goes to and its
result line (``None``: nothing to report).
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson

from parley.api.reply import error_response
from parley.dialects import anthropic_messages_reply
from parley.domain.batches import (
    DONE,
    LINE_CANCELLED,
    LINE_EXPIRED,
    LINE_FAILED,
    MESSAGES_ENDPOINT,
    Batch,
    BatchLine,
    error_line,
    line_request_id,
    output_line,
)
from parley.errors import ParleyError

Outcome = tuple[int, str, str | None]
"""A line's end: its number, its state, its result line."""
INTERRUPTED = "The gateway stopped while this line was in flight; it is not sent again."
EXPIRED_LINE = "This line was not run before the batch expired."


class Results(Protocol):
    """The ends of one batch API's lines."""

    @property
    def files(self) -> bool:
        """Whether the batch's results are written as an output and an error file."""

    def answered(self, batch: Batch, item: BatchLine, status: int, body: bytes) -> Outcome:
        """The line was answered (``status``, ``body``: the reply an interactive call
        would have had)."""

    def refused(self, batch: Batch, item: BatchLine, error: ParleyError) -> Outcome:
        """The line failed with ``error``."""

    def interrupted(self, batch: Batch, item: BatchLine) -> Outcome:
        """The line may have reached its upstream when its lane died."""

    def expired(self, batch: Batch, item: BatchLine) -> Outcome:
        """The batch expired before the line was sent."""

    def cancelled(self, batch: Batch, item: BatchLine) -> Outcome:
        """The batch was cancelled before the line was sent."""


class OpenAiResults:
    """``/v1/batches``: OpenAI's lines, for the output file (2xx) or the error file."""

    files = True

    def answered(self, batch: Batch, item: BatchLine, status: int, body: bytes) -> Outcome:
        state = DONE if status < 300 else LINE_FAILED
        return item.line, state, output_line(batch.id, item.line, item.custom_id, status, body)

    def refused(self, batch: Batch, item: BatchLine, error: ParleyError) -> Outcome:
        body = _bytes(error_response(error).body)
        result = output_line(batch.id, item.line, item.custom_id, error.status, body)
        return item.line, LINE_FAILED, result

    def interrupted(self, batch: Batch, item: BatchLine) -> Outcome:
        result = error_line(batch.id, item.line, item.custom_id, "interrupted", INTERRUPTED)
        return item.line, LINE_FAILED, result

    def expired(self, batch: Batch, item: BatchLine) -> Outcome:
        result = error_line(batch.id, item.line, item.custom_id, "batch_expired", EXPIRED_LINE)
        return item.line, LINE_FAILED, result

    def cancelled(self, batch: Batch, item: BatchLine) -> Outcome:
        return item.line, LINE_CANCELLED, None


class MessagesResults:
    """``/v1/messages/batches``: Anthropic's ``MessageBatchIndividualResponse`` lines,
    ``result.type`` ``succeeded`` (with the ``message``), ``errored`` (with Anthropic's
    error envelope), ``canceled`` or ``expired``."""

    files = False

    def answered(self, batch: Batch, item: BatchLine, status: int, body: bytes) -> Outcome:
        if status < 300:
            result = {"type": "succeeded", "message": orjson.Fragment(body)}
            return item.line, DONE, _line(item, result)
        return item.line, LINE_FAILED, _line(item, {"type": "errored", "error": _parsed(body)})

    def refused(self, batch: Batch, item: BatchLine, error: ParleyError) -> Outcome:
        envelope = anthropic_messages_reply.error_body(error)
        return item.line, LINE_FAILED, self._errored(batch, item, envelope)

    def interrupted(self, batch: Batch, item: BatchLine) -> Outcome:
        envelope = {"type": "error", "error": {"type": "api_error", "message": INTERRUPTED}}
        return item.line, LINE_FAILED, self._errored(batch, item, envelope)

    def expired(self, batch: Batch, item: BatchLine) -> Outcome:
        return item.line, LINE_EXPIRED, _line(item, {"type": "expired"})

    def cancelled(self, batch: Batch, item: BatchLine) -> Outcome:
        return item.line, LINE_CANCELLED, _line(item, {"type": "canceled"})

    def _errored(self, batch: Batch, item: BatchLine, envelope: dict[str, Any]) -> str:
        envelope["request_id"] = line_request_id(batch.id, item.line)
        return _line(item, {"type": "errored", "error": envelope})


OPENAI = OpenAiResults()
MESSAGES = MessagesResults()


def results_of(batch: Batch) -> Results:
    return MESSAGES if batch.endpoint == MESSAGES_ENDPOINT else OPENAI


def _line(item: BatchLine, result: dict[str, Any]) -> str:
    return orjson.dumps({"custom_id": item.custom_id, "result": result}).decode()


def _parsed(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return {"type": "error", "error": {"type": "api_error", "message": "No reply."}}


def _bytes(body: Any) -> bytes:
    return bytes(body) if isinstance(body, bytes | bytearray) else b"null"
