"""The request log's refusals: a request whose key was known but that was never admitted
(a revoked key, a disabled group, a bad body, an unknown model, a rate or the budget)
is logged by the gateway's edge when it renders the refusal.

Admitted calls are logged by the runner's ``Metered``, once; the runner marks such a
request ``ADMITTED`` so the edge never logs it a second time. A refusal raised in
the runner's first stages leaves the model names it knew in ``REFUSED_MODEL``. What the
caller sent is cut to fit the store's columns and cleaned of what a database cannot
hold (NUL characters, lone surrogates), so one odd request cannot fail a whole batch.
"""

from __future__ import annotations

from aiohttp import web

from parley.errors import ParleyError
from parley.pipeline.authenticate import Caller
from parley.pipeline.context import ADMITTED, REFUSED_MODEL, SERVICES
from parley.pipeline.meter import Refusal, failure_detail
from parley.telemetry.request_ids import request_id

MAX_TEXT = 200
"""The store's ``model_requested`` and ``endpoint`` columns hold this many characters."""


def log_refusal(
    request: web.Request, caller: Caller | None, error: ParleyError, began: float
) -> None:
    """Queue the refusal's record, if the request had a known key and was not admitted."""
    if caller is None or ADMITTED in request:
        return
    asked, model = request.get(REFUSED_MODEL, ("", ""))
    refusal = Refusal(
        caller=caller,
        request_id=request_id(request),
        endpoint=storable(request.path),
        status=error.status,
        error_code=error.code,
        began=began,
        model=model,
        model_requested=storable(asked),
        detail=failure_detail(error),
    )
    request.app[SERVICES].meter.refused(refusal)


def storable(text: str) -> str:
    """``text`` as a column can hold it: at most ``MAX_TEXT`` characters, valid UTF-8,
    no NUL."""
    text = text[:MAX_TEXT]
    if text.isascii():
        return text.replace("\x00", "")
    return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")
