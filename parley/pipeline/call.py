"""One admitted call as it moves through the stages."""

from __future__ import annotations

import itertools
import secrets
import time
from dataclasses import dataclass, field

from parley.domain.models import Resolved
from parley.pipeline.admit import Admission
from parley.pipeline.authenticate import Caller
from parley.runtime.content_capture import ContentCapture


class RequestIds:
    """Unique request ids without a system call each: a random per-process prefix and a
    counter (``req_<16 hex>_<n hex>``)."""

    def __init__(self) -> None:
        self._prefix = f"req_{secrets.token_hex(8)}_"
        self._next = itertools.count(1)

    def new(self) -> str:
        return f"{self._prefix}{next(self._next):x}"


@dataclass(slots=True)
class Call:
    request_id: str
    endpoint: str
    caller: Caller
    model: Resolved
    admission: Admission
    started: float = field(default_factory=time.monotonic)
    content: ContentCapture | None = None
    """What the content log keeps of the call, when its group's policy keeps anything."""
    finish_reasons: tuple[str, ...] = ()
    """Why the reply ended, as the caller was told (``dialects/finish.py``); read only
    for a traced call."""

    def age(self) -> float:
        """Seconds since the call was admitted."""
        return time.monotonic() - self.started

    def reply_headers(self) -> dict[str, str]:
        """Headers every reply to this call carries."""
        headers = {"x-request-id": self.request_id, **self.admission.headers}
        if self.model.deprecated:
            headers["deprecation"] = "true"
            headers["x-parley-model"] = self.model.spec.name
        return headers
