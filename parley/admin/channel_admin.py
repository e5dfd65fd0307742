"""Channels managed live: the service behind ``/admin/channels`` and the dashboard's
channel pages.

A stored channel is validated as the config file's are (``ChannelSettings``), its
models must be declared under ``models`` in the config, and its credential is sealed
(``parley.credentials``) before it reaches the store. Each change is audited (never
the credential: a hint of its last characters at most) and applied to this instance at
once (``Services.reload_channels``); other workers and instances pick it up with their
next refresh. The config file's channels are shown, and read-only.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from yarl import URL

from parley.admin.monitor import ChannelView
from parley.admin.service import AdminService
from parley.credentials import SealError
from parley.domain.channels import ChannelEvent, StoredChannel, key_hint
from parley.errors import InvalidRequest, NotFound, PermissionDenied, ServiceUnavailable
from parley.pipeline.services import Services
from parley.runtime.channel_book import reseal_all, stored_settings
from parley.runtime.channel_probe import ProbeResult, probe
from parley.settings import ChannelSettings
from parley.store.base import ChannelStore, Conflict, Missing

SPEC_FIELDS = (
    "type",
    "base_url",
    "models",
    "priority",
    "weight",
    "timeouts",
    "breaker",
    "health",
)
"""What the API takes besides ``name`` and ``api_key``."""
HISTORY = 100


def _first_problem(error: ValidationError) -> InvalidRequest:
    found = error.errors()[0]
    where = ".".join(str(part) for part in found["loc"]) or "channel"
    message = str(found["msg"]).removeprefix("Value error, ")
    return InvalidRequest(
        f"'{where}': {message}", param=str(found["loc"][0]) if found["loc"] else None
    )


class ChannelAdmin:
    def __init__(self, admin: AdminService, svc: Services) -> None:
        self._admin = admin
        self._svc = svc
        self._store: ChannelStore = svc.store
        self._book = svc.channels

    # reading

    def views(self) -> list[dict[str, Any]]:
        """Every channel: the config file's, then the stored ones (disabled included)."""
        active = {channel.name for channel in self._book.active}
        shown = [self._view(c, "config", None) for c in self._book.configured]
        for stored in self._book.stored:
            settings = self._shown_settings(stored)
            view = self._view(settings, "database", stored)
            view["serving"] = stored.name in active
            shown.append(view)
        return shown

    def view(self, name: str) -> dict[str, Any]:
        for found in self.views():
            if found["name"] == name:
                return found
        raise NotFound(f"No channel named '{name}'.", param="name")

    def _shown_settings(self, stored: StoredChannel) -> ChannelSettings:
        """The stored channel's settings for display: the credential never opened."""
        spec = {**stored.spec, "name": stored.name, "api_key": None}
        return ChannelSettings.model_validate(spec)

    def _view(
        self, settings: ChannelSettings, source: str, stored: StoredChannel | None
    ) -> dict[str, Any]:
        svc = self._svc
        health = svc.meter.health.snapshot(settings.name)
        breakers = tuple(svc.breakers.views(settings.name))
        check = svc.health_checks.last.get(settings.name) if svc.health_checks else None
        view = ChannelView(settings, health, breakers, check).view()
        if stored is None:
            return {
                **view,
                "source": source,
                "read_only": True,
                "disabled": False,
                "disabled_by": None,
                "serving": True,
                "key_hint": None,
            }
        return {
            **view,
            "source": source,
            "read_only": False,
            "has_api_key": stored.api_key_sealed is not None,
            "key_hint": stored.key_hint,
            "disabled": stored.disabled_at is not None,
            "disabled_at": stored.disabled_at.isoformat() if stored.disabled_at else None,
            "disabled_by": stored.disabled_by,
            "created_at": stored.created_at.isoformat(),
            "updated_at": stored.updated_at.isoformat(),
        }

    async def history(self, name: str) -> list[ChannelEvent]:
        self._known(name)
        return await self._store.channel_events(name, HISTORY)

    # changing

    async def create(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("name")
        if not isinstance(name, str) or not name or len(name) > 64 or not name.isprintable():
            raise InvalidRequest("'name' must be 1 to 64 printable characters.", param="name")
        if self._book.is_configured(name):
            raise InvalidRequest(
                f"The config file already has a channel named '{name}'.",
                param="name",
                code="conflict",
            )
        spec = self._checked({k: body[k] for k in SPEC_FIELDS if k in body}, name)
        sealed, hint = self._sealed(body.get("api_key"))
        now = datetime.now(UTC)
        channel = StoredChannel(name, spec, sealed, hint, None, now, now)
        try:
            await self._store.add_channel(channel)
        except Conflict:
            raise InvalidRequest(
                f"A channel named '{name}' already exists.", param="name", code="conflict"
            ) from None
        await self._admin.audit("channel.create", name, **_detail(spec, hint))
        return await self._applied(name)

    async def update(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        stored = self._stored(name)
        changed = {k: body[k] for k in SPEC_FIELDS if k in body}
        spec = self._checked({**stored.spec, **changed}, name)
        sealed, hint = stored.api_key_sealed, stored.key_hint
        if "api_key" in body:
            sealed, hint = self._sealed(body["api_key"])
        updated = replace(
            stored, spec=spec, api_key_sealed=sealed, key_hint=hint, updated_at=datetime.now(UTC)
        )
        await self._replace(updated)
        detail = _detail(spec, hint)
        if "api_key" in body:
            detail["api_key"] = "replaced" if sealed else "removed"
        await self._admin.audit("channel.update", name, **detail)
        return await self._applied(name)

    async def set_disabled(self, name: str, disabled: bool) -> dict[str, Any]:
        stored = self._stored(name)
        now = datetime.now(UTC)
        await self._replace(
            replace(
                stored,
                disabled_at=now if disabled else None,
                disabled_by=self._admin.actor.who if disabled else None,
                updated_at=now,
            )
        )
        await self._admin.audit("channel.disable" if disabled else "channel.enable", name)
        return await self._applied(name)

    async def delete(self, name: str) -> None:
        self._stored(name)
        await self._store.delete_channel(name)
        await self._admin.audit("channel.delete", name)
        await self._svc.reload_channels()

    async def reseal(self) -> int:
        """Seal every stored credential with the first key; how many were sealed."""
        try:
            count = await reseal_all(self._store, self._book.box)
        except SealError as error:
            raise ServiceUnavailable(str(error)) from None
        await self._admin.audit("channel.reseal", "channels", channels=count)
        await self._svc.reload_channels()
        return count

    async def test(self, name: str, model: str | None) -> ProbeResult:
        """One minimal real call to ``model`` (default: the channel's first) on the
        channel, enabled or not; kept in its history."""
        settings = self._settings(name)
        served = settings.models[0] if model is None else None
        for candidate in settings.models:
            if candidate.name == model:
                served = candidate
        if served is None:
            raise InvalidRequest(f"Channel '{name}' does not serve '{model}'.", param="model")
        result = await probe(self._svc.providers, settings, served, self._svc.kind_of(served.name))
        event = ChannelEvent(
            channel=name,
            model=served.name,
            kind="test",
            state="ok" if result.ok else "failed",
            message=result.message,
            actor=self._admin.actor.who,
            created_at=datetime.now(UTC),
            status=result.status,
            latency_ms=result.latency_ms,
        )
        await self._store.record_channel_events([event])
        await self._admin.audit(
            "channel.test",
            name,
            model=served.name,
            status=result.status,
            latency_ms=result.latency_ms,
        )
        return result

    # the parts

    def _known(self, name: str) -> None:
        if not self._book.is_configured(name) and not any(
            s.name == name for s in self._book.stored
        ):
            raise NotFound(f"No channel named '{name}'.", param="name")

    def _stored(self, name: str) -> StoredChannel:
        if self._book.is_configured(name):
            raise PermissionDenied(
                f"Channel '{name}' comes from the config file: change it there.",
                code="read_only_channel",
            )
        for stored in self._book.stored:
            if stored.name == name:
                return stored
        raise NotFound(f"No channel named '{name}'.", param="name")

    def _settings(self, name: str) -> ChannelSettings:
        for configured in self._book.configured:
            if configured.name == name:
                return configured
        stored = self._stored(name)
        try:
            return stored_settings(stored, self._book.box)
        except SealError as error:
            raise ServiceUnavailable(str(error)) from None

    def _checked(self, spec: dict[str, Any], name: str) -> dict[str, Any]:
        """The spec validated as a channel of the config file would be; JSON-ready."""
        try:
            settings = ChannelSettings.model_validate({**spec, "name": name})
        except ValidationError as error:
            raise _first_problem(error) from None
        if settings.type not in self._svc.providers.types():
            known = ", ".join(sorted(self._svc.providers.types()))
            raise InvalidRequest(
                f"Unknown channel type '{settings.type}' (known: {known}).", param="type"
            )
        for served in settings.models:
            if self._svc.models.resolve(served.name) is None:
                raise InvalidRequest(
                    f"'{served.name}' is not a model declared in the config file or on "
                    "the Models page.",
                    param="models",
                )
        return settings.model_dump(mode="json", exclude={"name", "api_key"})

    def _sealed(self, api_key: Any) -> tuple[str | None, str | None]:
        if api_key is None or api_key == "":
            return None, None
        if (
            not isinstance(api_key, str)
            or len(api_key) > 4096
            or any(c in api_key for c in "\r\n\0")
        ):
            raise InvalidRequest("'api_key' must be one line of text.", param="api_key")
        try:
            return self._book.box.seal(api_key), key_hint(api_key)
        except SealError as error:
            raise ServiceUnavailable(str(error)) from None

    async def _replace(self, channel: StoredChannel) -> None:
        try:
            await self._store.replace_channel(channel)
        except Missing:
            raise NotFound(f"No channel named '{channel.name}'.", param="name") from None

    async def _applied(self, name: str) -> dict[str, Any]:
        await self._svc.reload_channels()
        return self.view(name)


def _detail(spec: dict[str, Any], hint: str | None) -> dict[str, Any]:
    """A stored channel as the audit log shows it: no credential, its hint at most."""
    models = [
        m["name"] if not m.get("upstream") else f"{m['name']}->{m['upstream']}"
        for m in spec["models"]
    ]
    return {
        "type": spec["type"],
        "base_url": str(URL(spec["base_url"]).with_user(None).with_query(None)),
        "models": models,
        "priority": spec["priority"],
        "weight": spec["weight"],
        "api_key": hint,
    }
