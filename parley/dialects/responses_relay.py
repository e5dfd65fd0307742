"""A Responses stream relayed from an upstream that serves the Responses API, sans-IO.

Each event goes on with its data as the upstream wrote it (reasoning items, their
``encrypted_content`` and fields Parley does not know survive), except the events that
carry the whole ``response`` (``response.created``, ``.in_progress``, ``.completed``,
``.incomplete``, ``.failed``), whose ``response.model`` is renamed to the caller's name.
The relay reads the usage from the final response for metering (else estimates from
the text deltas) and keeps that response for storing. An ``error`` event is the
failure; a terminal ``response.*`` event ends the stream, and a body that ends before
one is a failure too.
"""

from __future__ import annotations

import orjson

from parley import upstream_json
from parley.dialects.chat_to_responses import sse
from parley.dialects.openai_chat_reply import read_usage as read_chat_usage
from parley.dialects.responses_objects import response_error
from parley.dialects.translator import TRUNCATED, Failure, delivered_estimate
from parley.domain.usage import Usage, with_estimate
from parley.domain.wire import JSON
from parley.sse import EventTooLarge, SseEvent, SseParser, encode_event

WHOLE = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.completed",
        "response.incomplete",
        "response.failed",
    }
)
TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
    }
)


def read_usage(usage: object) -> Usage | None:
    """A Responses ``usage`` object (input, cached, output and reasoning tokens) as
    ``Usage``, validated as chat usage is; ``None`` when it holds no valid counts."""
    if not isinstance(usage, dict):
        return None
    inputs, outputs = usage.get("input_tokens_details"), usage.get("output_tokens_details")
    chat: JSON = {
        "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens"),
        "total_tokens": usage.get("total_tokens"),
    }
    if isinstance(inputs, dict):
        chat["prompt_tokens_details"] = {"cached_tokens": inputs.get("cached_tokens")}
    if isinstance(outputs, dict):
        chat["completion_tokens_details"] = {"reasoning_tokens": outputs.get("reasoning_tokens")}
    return read_chat_usage(chat)


class ResponsesRelay:
    """``Translator[bytes]``: Responses events in, the same events out (model renamed)."""

    __slots__ = (
        "_characters",
        "_model",
        "_parser",
        "_pieces",
        "_prompt_estimate",
        "_reported",
        "_sequence",
        "done",
        "failure",
        "response",
    )

    def __init__(self, model: str, prompt_estimate: int, max_event_bytes: int) -> None:
        self._model = model
        self._prompt_estimate = prompt_estimate
        self._parser = SseParser(max_event_bytes)
        self._reported: Usage | None = None
        self._characters = 0
        self._pieces = 0
        self._sequence = -1
        """The last ``sequence_number`` relayed."""
        self.response: JSON | None = None
        """The latest whole ``response`` the upstream sent (the final one once ``done``)."""
        self.done = False
        self.failure: Failure | None = None

    def feed(self, data: bytes) -> list[bytes]:
        if self.done or self.failure is not None:
            return []
        try:
            events = self._parser.feed(data)
        except EventTooLarge as error:
            out = self._events(error.events)
            if self.failure is None and not self.done:
                self.failure = Failure(too_large=True)
            return out
        return self._events(events)

    def end(self) -> list[bytes]:
        if not self.done and self.failure is None:
            self.failure = TRUNCATED  # no terminal ``response.*`` event: cut short
        return []

    def delivered(self) -> Usage | None:
        estimate = delivered_estimate(self._prompt_estimate, self._characters, self._pieces)
        return with_estimate(self._reported, estimate)

    def failed(self, code: str | None, message: str) -> bytes:
        """How a started stream ends on a failure: ``error``, then ``response.failed``
        (when the upstream had said which response this is)."""
        self._sequence += 1
        error = {"type": "error", "code": code, "message": message, "param": None}
        out = [sse({**error, "sequence_number": self._sequence})]
        if self.response is not None:
            failed = {
                **self.response,
                "status": "failed",
                "error": response_error(code, message),
            }
            self._sequence += 1
            out.append(
                sse(
                    {
                        "type": "response.failed",
                        "response": failed,
                        "sequence_number": self._sequence,
                    }
                )
            )
        self.done = True
        return b"".join(out)

    def _events(self, events: list[SseEvent]) -> list[bytes]:
        out: list[bytes] = []
        for event in events:
            if self.done or self.failure is not None:
                break
            if not event.data or event.data.isspace():
                continue
            try:
                payload = upstream_json.loads(event.data)
            except orjson.JSONDecodeError:
                payload = None
            if not isinstance(payload, dict):
                self.failure = Failure(malformed=True)
                break
            kind = payload.get("type")
            if kind == "error" or (kind is None and "error" in payload):
                details = payload.get("error") if kind is None else payload
                self.failure = Failure(payload={"error": details})
                break
            number = payload.get("sequence_number")
            if isinstance(number, int):
                self._sequence = number
            if kind in WHOLE and isinstance(payload.get("response"), dict):
                response = payload["response"]
                response["model"] = self._model
                self.response = response
                usage = read_usage(response.get("usage"))
                if usage is not None:
                    self._reported = usage
                out.append(sse(payload))
                if kind in TERMINAL:
                    self.done = True
                continue
            if kind in DELTAS:
                delta = payload.get("delta")
                if isinstance(delta, str):
                    self._characters += len(delta)
                    self._pieces += 1
            out.append(encode_event(event.data.encode(), event.event))
        return out
