"""What a dashboard form shows: the values in its fields and the errors beside them.

A form that fails is rendered again with what the operator typed and the error next to
the field it names (``InvalidRequest.param``), or above the form when it names none; a
fresh form shows the current values. Templates read it through ``_fields.html``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from multidict import MultiDictProxy

from parley.errors import InvalidRequest

MULTIPLE = ("models",)
"""Fields a form sends once per chosen value (checkboxes)."""


@dataclass(slots=True)
class FormState:
    id: str
    """Prefixes the fields' ids, so two forms on one page never share one."""
    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    message: str = ""
    """An error that names no field."""

    @classmethod
    def fresh(cls, form_id: str, values: Mapping[str, Any] | None = None) -> FormState:
        return cls(form_id, dict(values or {}))

    @classmethod
    def failed(cls, form_id: str, sent: MultiDictProxy[Any], error: InvalidRequest) -> FormState:
        values: dict[str, Any] = {}
        for name in sent:
            if name == "csrf":
                continue
            chosen = [v for v in sent.getall(name) if isinstance(v, str)]
            values[name] = chosen if name in MULTIPLE else (chosen[0] if chosen else "")
        state = cls(form_id, values)
        if error.param and error.param in FIELD_NAMES:
            state.errors[error.param] = error.message
        else:
            state.message = error.message
        return state

    def value(self, name: str) -> str:
        value = self.values.get(name)
        if value is None:
            return ""
        return value if isinstance(value, str) else str(value)

    def chosen(self, name: str) -> list[str]:
        value = self.values.get(name)
        return list(value) if isinstance(value, list | tuple | set | frozenset) else []

    def error(self, name: str) -> str:
        return self.errors.get(name, "")

    @property
    def failed_now(self) -> bool:
        return bool(self.errors or self.message)


FIELD_NAMES = frozenset(
    {
        "name",
        "rpm",
        "tpm",
        "budget_usd",
        "models",
        "expires_in_days",
        "expires_on",
        "grace_minutes",
        "content_policy",
        "content_retention_days",
    }
)
