"""The access log (``server.access_log: true``): one line per request, with what the
meter knew about it.

aiohttp calls ``AccessLogger.log`` once a reply is sent. For a metered call the line
carries the usage record's model, status, latency and tokens, found by the reply's
``x-request-id`` among the records the meter handed over (``AccessRecords``); any other
request (a refused key, an unknown model, ``/health``) is logged from the request and
reply alone. No header value, key or body content is logged.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest

from parley.domain.usage import UsageRecord
from parley.pipeline.call import Call
from parley.pipeline.context import CALLER
from parley.telemetry.logs import FIELDS
from parley.telemetry.request_ids import HEADER

KEPT_RECORDS = 10_000
"""Records of calls whose reply has not been logged yet (a hung-up caller's never is)."""


class AccessRecords:
    """The meter's records, by request id, until the access log takes them."""

    def __init__(self) -> None:
        self._records: OrderedDict[str, tuple[str, UsageRecord]] = OrderedDict()

    def observe(self, call: Call, record: UsageRecord) -> None:
        self._records[record.request_id] = (call.caller.group.name, record)
        if len(self._records) > KEPT_RECORDS:
            self._records.popitem(last=False)

    def take(self, request_id: str | None) -> tuple[str, UsageRecord] | None:
        return self._records.pop(request_id, None) if request_id else None


ACCESS_RECORDS = web.AppKey("access_records", AccessRecords)


class AccessLogger(AbstractAccessLogger):
    def log(self, request: BaseRequest, response: web.StreamResponse, time: float) -> None:
        request_id = response.headers.get(HEADER)
        fields: dict[str, Any] = {
            "request_id": request_id,
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "latency_ms": round(time * 1000, 1),
            "remote": request.remote,
        }
        web_request = request if isinstance(request, web.Request) else None
        records = web_request.config_dict.get(ACCESS_RECORDS) if web_request else None
        metered = records.take(request_id) if records is not None else None
        if metered is not None:
            group, record = metered
            fields |= {
                "group": group,
                "model": record.model,
                "channel": record.channel or None,
                "prompt_tokens": record.prompt_tokens,
                "completion_tokens": record.completion_tokens,
                "metered_status": record.status,
            }
        elif web_request is not None and CALLER in web_request:
            fields["group"] = web_request[CALLER].group.name
        self.logger.info(
            "%s %s %s", request.method, request.path, response.status, extra={FIELDS: fields}
        )


def access_logger() -> logging.Logger:
    return logging.getLogger("parley.access")
