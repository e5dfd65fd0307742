"""Before an upload is read: refuse a caller that admission would refuse anyway.

An audio upload costs Parley its bytes on the wire, a spooled file and a decode (probe and
measure) before the runner can admit the call, because the call's model and size are in
the upload. A caller whose group is out of budget or out of requests this minute would be
refused at admission after all that work; ``refuse_before_upload`` refuses it first, with
the same error and headers, by *peeking* at the limits (nothing is taken: the runner's
admission still takes the request, exactly once). It runs ahead of the body, so an
over-limit caller's upload is never read.
"""

from __future__ import annotations

from aiohttp import web

from parley.errors import QuotaExceeded, RateLimited
from parley.pipeline.admit import check_room
from parley.pipeline.context import CALLER, SERVICES


async def refuse_before_upload(request: web.Request) -> None:
    """Raise the refusal admission would give this caller now, if any."""
    svc = request.app[SERVICES]
    caller = request[CALLER]
    try:
        await check_room(svc.limiter, svc.meter.ledger, caller)
    except (RateLimited, QuotaExceeded) as refusal:
        svc.watchers.tell_refusal(caller, refusal)
        raise
