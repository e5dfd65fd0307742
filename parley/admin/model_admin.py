"""Models managed live: the service behind ``/admin/models`` and the dashboard's Models
page.

A stored model is validated as the config file's are (``ModelSettings``: its kind, its
prices and how they fit the kind), its names may not be any of the config file's or
another stored model's (409), and each channel it names must exist. Each change is
audited (an update with each changed field before and after) and applied to this
instance at once (``Services.reload_channels``); other workers and instances pick it up
with their next refresh. A price change may be scheduled for a stated instant
(``effective_from``): until then the old price bills, from then the new one, on every
worker, without a refresh or a restart. The config file's models are shown, read-only.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from parley.admin.service import AdminService
from parley.domain.stored_models import StoredModel
from parley.errors import AlreadyExists, InvalidRequest, NotFound, PermissionDenied
from parley.pipeline.services import Services
from parley.runtime.model_book import SPEC_FIELDS, channels_of, model_settings
from parley.settings import ModelSettings
from parley.store.base import Conflict, Missing, ModelStore

NAME_LIMIT = 200
MAX_CHANNELS = 50
MAX_ALIASES = 50


def _first_problem(error: ValidationError) -> InvalidRequest:
    found = error.errors()[0]
    where = ".".join(str(part) for part in found["loc"]) or "model"
    message = str(found["msg"]).removeprefix("Value error, ")
    return InvalidRequest(f"'{where}': {message}", param=where if found["loc"] else None)


def _name(value: Any, field: str, *, slash: bool = True) -> str:
    """A name or alias: printable, no spaces (and, for a model's own name, no slash: it
    is a part of the dashboard's addresses)."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > NAME_LIMIT
        or not value.isprintable()
        or any(mark.isspace() for mark in value)
        or (not slash and "/" in value)
    ):
        without = "spaces" if slash else "spaces or slashes"
        raise InvalidRequest(
            f"'{field}' must be 1 to {NAME_LIMIT} printable characters without {without}.",
            param=field,
        )
    return value


def instant(value: Any, field: str = "effective_from") -> datetime:
    """An ISO 8601 instant with its time zone (``2026-12-01T00:00:00Z``)."""
    if not isinstance(value, str):
        raise InvalidRequest(f"'{field}' must be an ISO 8601 instant.", param=field)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidRequest(
            f"'{field}' must be an ISO 8601 instant such as 2026-12-01T00:00:00Z.", param=field
        ) from None
    if parsed.tzinfo is None:
        raise InvalidRequest(
            f"'{field}' must name its time zone (Z or +HH:MM): an instant, not a local time.",
            param=field,
        )
    return parsed.astimezone(UTC)


class ModelAdmin:
    def __init__(self, admin: AdminService, svc: Services) -> None:
        self._admin = admin
        self._svc = svc
        self._store: ModelStore = svc.store
        self._book = svc.model_book

    # reading

    def views(self) -> list[dict[str, Any]]:
        """Every model: the config file's, then the stored ones (disabled included)."""
        serving = self._served_by()
        shown = [self._config_view(model, serving) for model in self._svc.settings.models]
        now = datetime.now(UTC)
        shown += [self._stored_view(m.settled(now), serving) for m in self._book.stored]
        return shown

    def view(self, name: str) -> dict[str, Any]:
        for found in self.views():
            if found["name"] == name:
                return found
        raise NotFound(f"No model named '{name}'.", param="name")

    def _served_by(self) -> dict[str, list[dict[str, str]]]:
        """Each routed model's channels, with the upstream name each uses."""
        found: dict[str, list[dict[str, str]]] = {}
        for channel in self._book.serve(self._svc.channels.active):
            for served in channel.models:
                entry = {"channel": channel.name, "upstream": served.upstream or served.name}
                found.setdefault(served.name, []).append(entry)
        return found

    def _config_view(
        self, model: ModelSettings, serving: dict[str, list[dict[str, str]]]
    ) -> dict[str, Any]:
        return {
            "object": "model.entry",
            "name": model.name,
            "source": "config",
            "read_only": True,
            **model.model_dump(mode="json", include=set(SPEC_FIELDS)),
            "channels": serving.get(model.name, []),
            "prices": model.prices.model_dump(mode="json", exclude_defaults=True),
            "prices_from": None,
            "next_prices": None,
            "next_prices_from": None,
            "enabled": True,
            "serving": model.name in serving,
        }

    def _stored_view(
        self, stored: StoredModel, serving: dict[str, list[dict[str, str]]]
    ) -> dict[str, Any]:
        live = any(m.spec.name == stored.name for m in self._book.live)
        spec = {name: stored.spec.get(name) for name in SPEC_FIELDS}
        return {
            "object": "model.entry",
            "name": stored.name,
            "source": "database",
            "read_only": False,
            **spec,
            "channels": [
                {"channel": channel, "upstream": upstream}
                for channel, upstream in channels_of(stored)
            ],
            "prices": stored.prices,
            "prices_from": stored.prices_from.isoformat(),
            "next_prices": stored.next_prices,
            "next_prices_from": (
                stored.next_prices_from.isoformat() if stored.next_prices_from else None
            ),
            "enabled": stored.enabled,
            "serving": live and stored.name in serving,
            "created_at": stored.created_at.isoformat(),
            "updated_at": stored.updated_at.isoformat(),
        }

    # changing

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = _name(body.get("name"), "name", slash=False)
        if "effective_from" in body:
            raise InvalidRequest(
                "'effective_from' schedules a price change of a model that exists; "
                "a new model is priced from its creation.",
                param="effective_from",
            )
        fields = {k: body[k] for k in (*SPEC_FIELDS, "channels") if k in body}
        spec = self._spec(fields, body.get("prices", {}))
        prices = self._prices(name, spec, body.get("prices", {}))
        self._names_free(name, spec, None)
        now = datetime.now(UTC)
        enabled = self._enabled(body.get("enabled", True))
        model = StoredModel(name, spec, prices, now, None, None, enabled, now, now)
        try:
            await self._store.add_model(model)
        except Conflict:
            raise AlreadyExists(f"A model named '{name}' already exists.", param="name") from None
        await self._admin.audit("model.create", name, **_detail(model))
        return await self._applied(name)

    async def update(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        now = datetime.now(UTC)
        before = self._stored(name).settled(now)
        changed = {k: body[k] for k in (*SPEC_FIELDS, "channels") if k in body}
        spec = self._spec({**before.spec, **changed}, body.get("prices", before.prices))
        self._names_free(name, spec, name)
        after = replace(before, spec=spec, updated_at=now)
        if "enabled" in body:
            after = replace(after, enabled=self._enabled(body["enabled"]))
        after = self._repriced(after, body, now)
        await self._replace(after)
        await self._admin.audit("model.update", name, changed=_changes(before, after))
        return await self._applied(name)

    async def delete(self, name: str) -> None:
        self._stored(name)
        await self._store.delete_model(name)
        await self._admin.audit("model.delete", name)
        await self._svc.reload_channels()

    # the parts

    def _repriced(self, model: StoredModel, body: dict[str, Any], now: datetime) -> StoredModel:
        """``model`` with the body's price change: at once, or scheduled for
        ``effective_from``; ``next_prices: null`` cancels a scheduled change."""
        if "effective_from" in body and "prices" not in body:
            raise InvalidRequest(
                "'effective_from' needs 'prices': the prices that take effect then.",
                param="effective_from",
            )
        if "next_prices" in body:
            if body["next_prices"] is not None:
                raise InvalidRequest(
                    "'next_prices' may only be null (cancel the scheduled change); schedule "
                    "one with 'prices' and 'effective_from'.",
                    param="next_prices",
                )
            model = replace(model, next_prices=None, next_prices_from=None)
        if "prices" not in body:
            self._prices(model.name, model.spec, model.prices)  # still fits its kind
            if model.next_prices is not None:
                self._prices(model.name, model.spec, model.next_prices)
            return model
        prices = self._prices(model.name, model.spec, body["prices"])
        at = instant(body["effective_from"]) if body.get("effective_from") else now
        if at > now:
            return replace(model, next_prices=prices, next_prices_from=at)
        return replace(
            model, prices=prices, prices_from=now, next_prices=None, next_prices_from=None
        )

    def _spec(self, spec: dict[str, Any], prices: Any) -> dict[str, Any]:
        """The model's settings but name and prices, validated (with ``prices``, which
        some kinds must state; ``_prices`` reads them apart); JSON-ready."""
        fields = {k: v for k, v in spec.items() if k != "channels"}
        fields["prices"] = prices if isinstance(prices, dict) else {}
        try:
            settings = ModelSettings.model_validate({"name": "model", **fields})
        except ValidationError as error:
            raise _first_problem(error) from None
        for field in ("aliases", "retired_aliases"):
            names = getattr(settings, field)
            if len(names) > MAX_ALIASES:
                raise InvalidRequest(f"'{field}' holds at most {MAX_ALIASES} names.", param=field)
            for alias in names:
                _name(alias, field)
        checked = settings.model_dump(mode="json", include=set(SPEC_FIELDS))
        checked["channels"] = self._channels(spec.get("channels", []))
        return checked

    def _channels(self, raw: Any) -> list[dict[str, str]]:
        if not isinstance(raw, list) or len(raw) > MAX_CHANNELS:
            raise InvalidRequest(
                f"'channels' must be a list of at most {MAX_CHANNELS} channels.", param="channels"
            )
        known = {c.name for c in self._svc.channels.configured}
        known |= {c.name for c in self._svc.channels.stored}
        channels: list[dict[str, str]] = []
        for entry in raw:
            item = {"channel": entry} if isinstance(entry, str) else entry
            if not isinstance(item, dict) or set(item) - {"channel", "upstream"}:
                raise InvalidRequest(
                    '\'channels\' entries are a channel\'s name or {"channel", "upstream"}.',
                    param="channels",
                )
            channel = _name(item.get("channel"), "channels")
            if channel not in known:
                raise InvalidRequest(f"'channels': no channel named '{channel}'.", param="channels")
            if any(c["channel"] == channel for c in channels):
                raise InvalidRequest(f"'channels': '{channel}' is named twice.", param="channels")
            checked = {"channel": channel}
            if item.get("upstream"):
                checked["upstream"] = _name(item["upstream"], "channels")
            channels.append(checked)
        return channels

    def _prices(self, name: str, spec: dict[str, Any], prices: Any) -> dict[str, Any]:
        """``prices`` validated as the config file's, and as fitting the model's kind."""
        if not isinstance(prices, dict):
            raise InvalidRequest("'prices' must be an object.", param="prices")
        try:
            settings = model_settings(name, spec, prices)
        except ValidationError as error:
            raise _first_problem(error) from None
        for field, value in settings.prices.model_dump().items():
            if isinstance(value, Decimal) and value < 0:
                raise InvalidRequest(
                    f"'prices.{field}' must not be negative.", param=f"prices.{field}"
                )
        dumped: dict[str, Any] = settings.prices.model_dump(mode="json", exclude_defaults=True)
        return dumped

    def _names_free(self, name: str, spec: dict[str, Any], own: str | None) -> None:
        """Raise 409 when a name of the model is the config file's or another's."""
        names = (name, *spec.get("aliases", ()), *spec.get("retired_aliases", ()))
        if len(set(names)) != len(names):
            raise InvalidRequest("A model's name and aliases must differ.", param="aliases")
        for wanted in names:
            if self._svc.models.is_configured(wanted):
                raise AlreadyExists(
                    f"'{wanted}' is a model (or alias) of the config file, which is read-only "
                    "here: choose another name.",
                    param="name" if wanted == name else "aliases",
                )
            for other in self._book.stored:
                taken = (other.name, *other.spec.get("aliases", ()))
                taken += tuple(other.spec.get("retired_aliases", ()))
                if other.name != own and wanted in taken:
                    raise AlreadyExists(
                        f"'{wanted}' is already a name of the model '{other.name}'.",
                        param="name" if wanted == name else "aliases",
                    )

    @staticmethod
    def _enabled(value: Any) -> bool:
        if not isinstance(value, bool):
            raise InvalidRequest("'enabled' must be true or false.", param="enabled")
        return value

    def _stored(self, name: str) -> StoredModel:
        if any(model.name == name for model in self._svc.settings.models):
            raise PermissionDenied(
                f"Model '{name}' comes from the config file: change it there.",
                code="read_only_model",
            )
        found = self._book.find(name)
        if found is None:
            raise NotFound(f"No model named '{name}'.", param="name")
        return found

    async def _replace(self, model: StoredModel) -> None:
        try:
            await self._store.replace_model(model)
        except Missing:
            raise NotFound(f"No model named '{model.name}'.", param="name") from None

    async def _applied(self, name: str) -> dict[str, Any]:
        await self._svc.reload_channels()
        return self.view(name)


def _detail(model: StoredModel) -> dict[str, Any]:
    """A stored model as the audit log shows it."""
    return {
        **model.spec,
        "prices": model.prices,
        "next_prices": model.next_prices,
        "next_prices_from": model.next_prices_from.isoformat() if model.next_prices_from else None,
        "enabled": model.enabled,
    }


def _changes(before: StoredModel, after: StoredModel) -> dict[str, Any]:
    """Each field the update changed: ``{"before": …, "after": …}``."""
    old, new = _detail(before), _detail(after)
    return {
        field: {"before": old.get(field), "after": new.get(field)}
        for field in sorted(set(old) | set(new))
        if old.get(field) != new.get(field)
    }
