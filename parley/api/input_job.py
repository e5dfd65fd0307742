"""What the jobs of calls metered by their input alone share (embeddings, moderations).

Such a call sends the caller's body on, naming the public model's channel model; it is
held at Parley's estimate of its input tokens and allowed at most the ceiling the body's
size implies. Each job adds its own ``operation``, ``call``, ``usage`` and ``render``.
"""

from __future__ import annotations

from typing import Any

from parley.domain.models import Resolved
from parley.domain.tokens import prompt_ceiling
from parley.domain.usage import Allowance
from parley.pipeline.authenticate import Caller
from parley.providers.registry import ProviderRegistry


class InputJob:
    """The body, its estimate and ceiling, and the model resolution of an input-metered
    call (a ``ReplyJob`` once a subclass adds the rest)."""

    __slots__ = ("_body", "_ceiling", "_estimate", "_providers")

    def __init__(
        self,
        body: dict[str, Any],
        providers: ProviderRegistry,
        estimate: int,
        body_bytes: int,
        images: int = 0,
    ) -> None:
        self._body = body
        self._providers = providers
        self._estimate = max(1, estimate)
        self._ceiling = max(self._estimate, prompt_ceiling(body_bytes, images))

    @property
    def model(self) -> str:
        return str(self._body["model"])

    def accept(self, model: Resolved) -> None:
        self._body = {**self._body, "model": model.spec.name}

    def reservation(self, model: Resolved, caller: Caller) -> int:
        return self._estimate

    def allowance(self, model: Resolved) -> Allowance:
        return Allowance(prompt_tokens=self._ceiling)
