"""An error made in a body process (``runtime/body_pool.py``), to be made again in the
serving process: errors do not cross processes (their headers are a read-only mapping)."""

from __future__ import annotations

from parley.domain.value import value
from parley.errors import ParleyError


@value
class Refusal:
    """A ``ParleyError``'s kind and fields, as a plain value."""

    kind: type[ParleyError]
    message: str
    param: str | None
    code: str | None

    @classmethod
    def of(cls, error: ParleyError) -> Refusal:
        return cls(type(error), error.message, error.param, error.code)

    def error(self) -> ParleyError:
        return self.kind(self.message, param=self.param, code=self.code)
