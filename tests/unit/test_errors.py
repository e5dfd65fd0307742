"""The error tree: each class is its meaning, and an error is never changed once made."""

from __future__ import annotations

import orjson
import pytest
from aiohttp import web

from parley.api.reply import error_response, http_exception_as_error
from parley.errors import (
    AlreadyExists,
    HttpStatusError,
    InvalidRequest,
    MalformedRequest,
    ParleyError,
    RateLimited,
    UpstreamError,
    UpstreamRefused,
    UpstreamRejected,
)
from parley.providers.anthropic.refusal import stream_failure as anthropic_stream_failure
from parley.providers.openai.refusal import refusal, stream_failure


@pytest.mark.parametrize(
    "error",
    [
        ParleyError("Broken."),
        InvalidRequest("Bad.", param="model", code="bad"),
        MalformedRequest("Too long.", status=414, code="uri_too_long"),
        RateLimited("Slow down.", kind="tokens"),
        UpstreamRefused("Down.", upstream_status=503, retryable=True),
        UpstreamRejected("No.", upstream_status=422, code="context_length_exceeded"),
        HttpStatusError("Gone.", status=405),
    ],
)
@pytest.mark.parametrize(
    "field", ["status", "type", "code", "message", "param", "headers", "retryable"]
)
def test_an_error_is_fixed_once_made(error: ParleyError, field: str) -> None:
    before = orjson.dumps(error.body()), error.status
    with pytest.raises(AttributeError, match="fixed"):
        setattr(error, field, 409)
    assert (orjson.dumps(error.body()), error.status) == before


def test_headers_cannot_be_changed_in_place() -> None:
    error = ParleyError("Busy.", headers={"retry-after": "1"})
    with pytest.raises(TypeError):
        error.headers["retry-after"] = "9"  # type: ignore[index]
    assert dict(error.headers) == {"retry-after": "1"}


def test_a_relayed_rejection_is_its_own_class() -> None:
    error = refusal("main", 413, b'{"error": {"message": "Too big.", "code": "too_big"}}', None)
    assert type(error) is UpstreamRejected
    assert not error.retryable
    assert (error.status, error.type, error.code) == (413, "invalid_request_error", "too_big")
    assert error.headers == {"x-parley-upstream-error": "relayed"}


def test_another_4xx_is_relayed_as_a_400() -> None:
    error = refusal("main", 409, b'{"error": {"message": "Taken."}}', None)
    assert isinstance(error, UpstreamRejected)
    assert (error.status, error.upstream_status, error.code) == (400, 409, None)


def test_the_upstreams_own_failure_stays_a_502() -> None:
    error = refusal("main", 503, b"", None)
    assert type(error) is UpstreamRefused
    assert (error.status, error.type, error.code) == (502, "upstream_error", "bad_gateway")
    assert not error.headers


def test_a_streams_failure_event_is_a_502_that_is_not_retried() -> None:
    error = stream_failure("main", {"error": {"message": "boom", "code": 500}}, None)
    assert type(error) is UpstreamRefused
    assert not error.retryable
    assert error.body() == {
        "error": {
            "message": "The upstream channel `main` failed during the stream.",
            "type": "upstream_error",
            "param": None,
            "code": "bad_gateway",
        }
    }
    assert not error.headers


def test_a_streams_refusal_of_the_request_is_relayed() -> None:
    envelope = {"error": {"message": "Too long.", "code": 400, "param": "messages"}}
    error = stream_failure("main", envelope, None)
    assert isinstance(error, UpstreamRejected)
    assert (error.status, error.param) == (400, "messages")
    anthropic = {"type": "error", "error": {"type": "invalid_request_error", "message": "No."}}
    assert isinstance(anthropic_stream_failure("main", anthropic, None), UpstreamRejected)


def test_a_taken_name_is_a_409() -> None:
    error = AlreadyExists("Taken.", param="label", code="voice_exists")
    assert (error.status, error.type, error.code) == (409, "invalid_request_error", "voice_exists")


@pytest.mark.parametrize(
    ("exc", "status", "kind", "code"),
    [
        (
            web.HTTPMethodNotAllowed("PUT", ["GET"]),
            405,
            "invalid_request_error",
            "method_not_allowed",
        ),
        (web.HTTPGone(), 410, "invalid_request_error", None),
        (web.HTTPBadGateway(), 502, "server_error", None),
    ],
)
def test_aiohttp_statuses_keep_their_envelope(
    exc: web.HTTPException, status: int, kind: str, code: str | None
) -> None:
    error = http_exception_as_error(exc)
    response = error_response(error)
    assert response.status == status
    assert response.body is not None
    body = orjson.loads(response.body)["error"]  # type: ignore[arg-type]
    assert (body["type"], body["code"], body["param"]) == (kind, code, None)
    assert isinstance(error, ParleyError) and not isinstance(error, UpstreamError)
