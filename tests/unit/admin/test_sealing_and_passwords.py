"""Credentials sealed at rest (rotation: the first key seals, every key opens, reseal
moves them to the first), passwords hashed with scrypt, and the channel book that
swaps channels without losing the breakers' state."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from parley.admin.passwords import hash_password_now, outdated, verify_now
from parley.credentials import CredentialBox, SealError, new_key
from parley.domain.accounts import allows
from parley.domain.channels import StoredChannel, key_hint
from parley.errors import UpstreamError
from parley.pipeline.route import Router
from parley.runtime.breaker import Breakers
from parley.runtime.channel_book import ChannelBook
from parley.runtime.circuit import State
from parley.settings import ChannelSettings
from tests.unit.runtime.test_breaker import refused, route_of

SECRET = "sk-provider-credential-123456"
SPEC_OF_PIGEON = {"type": "pigeon", "base_url": "http://coop.example/v1", "models": ["m"]}


def test_the_first_key_seals_and_every_key_opens() -> None:
    old, new = new_key(), new_key()
    sealed_old = CredentialBox([old]).seal(SECRET)
    assert SECRET not in sealed_old
    rotated = CredentialBox([new, old])
    assert rotated.open(sealed_old, "c") == SECRET
    resealed = rotated.reseal(sealed_old, "c")
    assert CredentialBox([new]).open(resealed, "c") == SECRET
    with pytest.raises(SealError, match="channel `c`") as caught:
        CredentialBox([old]).open(resealed, "c")
    assert SECRET not in str(caught.value)
    with pytest.raises(SealError, match="PARLEY_SECRET_KEYS"):
        CredentialBox([]).seal(SECRET)
    with pytest.raises(SealError, match="#2"):
        CredentialBox([new, "not-a-key"])


def test_a_hint_shows_four_characters_of_a_long_credential_only() -> None:
    assert key_hint(SECRET) == "…3456"
    assert key_hint("short-key") == "…"


@pytest.mark.owasp_scrypt
def test_passwords_are_salted_scrypt_and_checked_in_constant_time() -> None:
    first, second = hash_password_now("correct horse"), hash_password_now("correct horse")
    assert first != second and first.startswith("scrypt$17$8$1$")
    assert verify_now("correct horse", first) and not verify_now("wrong horse", first)
    assert not verify_now("correct horse", "md5$nothing")
    assert not outdated(first) and outdated("scrypt$14$8$1$AAAA$AAAA")
    assert allows("owner", "operator") and not allows("viewer", "operator")


def settings(name: str, **extra: Any) -> ChannelSettings:
    return ChannelSettings.model_validate(
        {"name": name, "base_url": f"http://{name}.example/v1", "models": ["m"], **extra}
    )


def test_new_channels_get_breakers_and_old_ones_keep_their_state() -> None:
    a, b = settings("a", priority=1), settings("b")
    breakers = Breakers([a])
    failure: UpstreamError = refused(500)
    route = route_of(Router([a], random.Random(1)), "a")
    for _ in range(5):
        breakers.failed(route, failure)
    assert breakers.views("a")[1].state == State.OPEN
    breakers.update([a, b])
    assert breakers.views("a")[1].state == State.OPEN  # kept
    assert [v.state for v in breakers.views("b")] == [State.CLOSED, State.CLOSED]
    breakers.update([b])
    assert breakers.views("a") == []
    assert breakers.arrange(Router([b], random.Random(1)).routes("m"))


class Stored:
    def __init__(self, channels: list[StoredChannel]) -> None:
        self.channels = channels
        self.events: list[Any] = []

    async def list_channels(self) -> list[StoredChannel]:
        return self.channels

    async def record_channel_events(self, events: Any) -> None:
        self.events.extend(events)


def stored(name: str, box: CredentialBox, *, disabled: bool = False) -> StoredChannel:
    now = datetime.now(UTC)
    spec = {"type": "openai", "base_url": "http://up.example/v1", "models": [{"name": "m"}]}
    return StoredChannel(
        name, spec, box.seal(SECRET), key_hint(SECRET), now if disabled else None, now, now
    )


async def test_the_book_opens_enabled_channels_and_skips_what_it_cannot_serve() -> None:
    box = CredentialBox([new_key()])
    other = CredentialBox([new_key()])
    book = ChannelBook([settings("config")], box, frozenset({"openai"}))
    store = Stored(
        [
            stored("live", box),
            stored("off", box, disabled=True),
            stored("config", box),  # the file's name wins
            stored("foreign", other),  # no configured key opens it
            replace(stored("pigeon", box), spec={**SPEC_OF_PIGEON}),  # no adapter for it
        ]
    )
    assert await book.load(store)  # type: ignore[arg-type]
    assert [c.name for c in book.active] == ["config", "live"]
    assert book.find("live") is not None and book.find("live").api_key == SECRET  # type: ignore[union-attr]
    assert not await book.load(store)  # type: ignore[arg-type]  # nothing changed
    breakers = Breakers(book.active)
    breakers.transitions.append(book.transition)
    route = route_of(Router(book.active, random.Random(1)), "live")
    for _ in range(5):
        breakers.failed(route, refused(503))
    await book.flush(store)  # type: ignore[arg-type]
    assert [(e.channel, e.kind, e.state) for e in store.events] == [("live", "breaker", "open")]
    await book.flush(store)  # type: ignore[arg-type]
    assert len(store.events) == 1
