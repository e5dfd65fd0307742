"""Channels managed from the admin surface, their event history, and administrator
accounts, as queries on one open connection. ``SqlStore`` delegates here."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, RowMapping, select

from parley.domain.accounts import Account
from parley.domain.channels import ChannelEvent, StoredChannel
from parley.store import records
from parley.store.base import Conflict, Missing
from parley.store.plain import as_utc
from parley.store.schema import admin_accounts, channel_events, channels


def _channel_values(channel: StoredChannel) -> dict[str, Any]:
    return {
        "name": channel.name,
        "spec": json.dumps(channel.spec, sort_keys=True),
        "api_key_sealed": channel.api_key_sealed,
        "key_hint": channel.key_hint,
        "disabled_at": channel.disabled_at,
        "disabled_by": channel.disabled_by,
        "created_at": channel.created_at,
        "updated_at": channel.updated_at,
    }


def list_channels(conn: Connection) -> list[StoredChannel]:
    rows = conn.execute(select(channels).order_by(channels.c.name)).mappings()
    return [records.channel(row) for row in rows]


def add_channel(conn: Connection, channel: StoredChannel) -> StoredChannel:
    taken = conn.execute(select(channels.c.id).where(channels.c.name == channel.name)).first()
    if taken is not None:
        raise Conflict(f"a channel named `{channel.name}` already exists")
    row = (
        conn.execute(channels.insert().values(_channel_values(channel)).returning(*channels.c))
        .mappings()
        .one()
    )
    return records.channel(row)


def replace_channel(
    conn: Connection, channel: StoredChannel, if_updated_at: datetime | None = None
) -> StoredChannel:
    """Write every field of the named channel (its name and creation time kept); with
    ``if_updated_at``, only if it is still the channel last changed then (``Conflict``
    when it changed since)."""
    values = _channel_values(channel)
    values.pop("created_at")
    statement = channels.update().where(channels.c.name == channel.name)
    if if_updated_at is not None:
        statement = statement.where(channels.c.updated_at == if_updated_at)
    row = conn.execute(statement.values(values).returning(*channels.c)).mappings().one_or_none()
    if row is not None:
        return records.channel(row)
    if if_updated_at is not None and get_channel(conn, channel.name) is not None:
        raise Conflict(f"the channel `{channel.name}` changed since it was read")
    raise Missing(f"there is no channel named `{channel.name}`")


def get_channel(conn: Connection, name: str) -> StoredChannel | None:
    row = conn.execute(select(channels).where(channels.c.name == name)).mappings().one_or_none()
    return None if row is None else records.channel(row)


def delete_channel(conn: Connection, name: str) -> bool:
    return bool(conn.execute(channels.delete().where(channels.c.name == name)).rowcount)


def record_channel_events(conn: Connection, events: list[ChannelEvent]) -> None:
    if events:
        conn.execute(channel_events.insert(), [_event_values(event) for event in events])


def _event_values(event: ChannelEvent) -> dict[str, Any]:
    return {
        "channel": event.channel,
        "model": event.model,
        "kind": event.kind,
        "state": event.state,
        "status": event.status,
        "latency_ms": event.latency_ms,
        "message": event.message,
        "actor": event.actor,
        "created_at": event.created_at,
    }


def prune_channel_events(conn: Connection, before: datetime) -> int:
    statement = channel_events.delete().where(channel_events.c.created_at < before)
    return int(conn.execute(statement).rowcount or 0)


def channel_events_of(conn: Connection, channel: str, limit: int) -> list[ChannelEvent]:
    """The channel's newest events first."""
    c = channel_events.c
    query = select(channel_events).where(c.channel == channel).order_by(c.id.desc()).limit(limit)
    return [
        ChannelEvent(**{**row, "created_at": as_utc(row["created_at"])})
        for row in conn.execute(query).mappings()
    ]


def _account(row: RowMapping) -> Account:
    disabled = row["disabled_at"]
    return Account(
        name=row["name"],
        role=row["role"],
        password_hash=row["password_hash"],
        created_at=as_utc(row["created_at"]),
        updated_at=as_utc(row["updated_at"]),
        disabled_at=as_utc(disabled) if disabled is not None else None,
        id=row["id"],
        sso_subject=row["sso_subject"],
        group_id=row["group_id"],
    )


def list_accounts(conn: Connection) -> list[Account]:
    rows = conn.execute(select(admin_accounts).order_by(admin_accounts.c.name)).mappings()
    return [_account(row) for row in rows]


def get_account(conn: Connection, name: str) -> Account | None:
    query = select(admin_accounts).where(admin_accounts.c.name == name)
    row = conn.execute(query).mappings().one_or_none()
    return None if row is None else _account(row)


def account_of_subject(conn: Connection, subject: str) -> Account | None:
    query = select(admin_accounts).where(admin_accounts.c.sso_subject == subject)
    row = conn.execute(query).mappings().one_or_none()
    return None if row is None else _account(row)


def add_account(conn: Connection, account: Account) -> Account:
    if get_account(conn, account.name) is not None:
        raise Conflict(f"an account named `{account.name}` already exists")
    if account.sso_subject is not None and account_of_subject(conn, account.sso_subject):
        raise Conflict("another account is bound to this single sign-on identity")
    values = {
        "name": account.name,
        "role": account.role,
        "password_hash": account.password_hash,
        "disabled_at": account.disabled_at,
        "created_at": account.created_at,
        "updated_at": account.updated_at,
        "sso_subject": account.sso_subject,
        "group_id": account.group_id,
    }
    row = (
        conn.execute(admin_accounts.insert().values(values).returning(*admin_accounts.c))
        .mappings()
        .one()
    )
    return _account(row)


def update_account(conn: Connection, name: str, changes: dict[str, Any], now: datetime) -> Account:
    statement = (
        admin_accounts.update()
        .where(admin_accounts.c.name == name)
        .values({**changes, "updated_at": now})
        .returning(*admin_accounts.c)
    )
    row = conn.execute(statement).mappings().one_or_none()
    if row is None:
        raise Missing(f"there is no account named `{name}`")
    return _account(row)


def delete_account(conn: Connection, name: str) -> bool:
    return bool(conn.execute(admin_accounts.delete().where(admin_accounts.c.name == name)).rowcount)
