"""A clone deleted in Parley is deleted at its engine, retried until it is.

The three clone-capable engines (ElevenLabs, Cartesia and a vLLM-Omni style server
behind ``openai-audio``) run as fakes that refuse a voice deletion a given number of
times (quoting the channel's key in their error, as a careless proxy would) before they
delete again. The caller's deletion is done at once: the voice is neither listed nor
used again. What the engine refused is a row of ``voice_deletions`` (its attempts, its
error without the key, its next attempt) that the background loop retries, after
``clone_deletion_retry_seconds`` doubled after each failure up to the maximum (timed
by the retrier's clock, which the tests move by hand: no test sleeps long), across a
restart of the gateway; a voice the engine no longer has counts as deleted. The
operator sees the rows on the admin API and the dashboard, retries one now or gives it
up, and both are audited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from parley.domain.voices import PendingDeletion
from parley.voices.deletions import CLAIM_SECONDS
from tests.api.admin_client import ADMIN, browser_session, call, hidden, login
from tests.api.harness import Gateway
from tests.api.speech.test_hosted_voices import CARTESIA_KEY, ELEVEN_KEY, hosted_config
from tests.clips import clip
from tests.upstreams.cartesia import FakeCartesia
from tests.upstreams.elevenlabs import FakeElevenLabs
from tests.upstreams.openai_audio import FakeAudioEngine

OMNI_KEY = "sk-omni-0123456789abcdefABCDEF"
FIRST, LONGEST, SCAN = 30.0, 60.0, 0.02
"""The retries' timing here: 30 s after a first failure, then 60 s (the cap), on the
retrier's clock (``Manual``); the loop looks every 20 ms of real time."""
SLOW = {"clone_deletion_retry_seconds": 3600, "clone_deletion_scan_seconds": 3600}
"""No background retry within a test: the operator's retries alone."""
REFUSING = 1_000_000
ENGINES = ["elevenlabs", "cartesia", "openai-audio"]
HOSTED = ["elevenlabs", "cartesia"]


@dataclass
class Fakes:
    eleven: FakeElevenLabs
    cartesia: FakeCartesia
    omni: FakeAudioEngine

    def model(self, engine: str) -> str:
        return {"elevenlabs": "tts-eleven", "cartesia": "tts-cartesia"}.get(engine, "tts-pro")

    def key(self, engine: str) -> str:
        return {"elevenlabs": ELEVEN_KEY, "cartesia": CARTESIA_KEY}.get(engine, OMNI_KEY)

    def refuse(self, engine: str, times: int) -> None:
        self._fake(engine).refuse_deletes = times

    def holds(self, engine: str, engine_name: str) -> bool:
        if engine == "elevenlabs":
            return engine_name in self.eleven.voices
        if engine == "cartesia":
            return engine_name in self.cartesia.voices
        return engine_name in self.omni.uploaded

    def forget(self, engine: str, engine_name: str) -> None:
        """The engine loses the voice (deleted by someone else)."""
        held = {"elevenlabs": self.eleven.voices, "cartesia": self.cartesia.voices}
        held.get(engine, self.omni.uploaded).pop(engine_name)

    def deletes(self, engine: str) -> int:
        return sum(1 for r in self._fake(engine).requests if r.method == "DELETE")

    def _fake(self, engine: str) -> Any:
        return {"elevenlabs": self.eleven, "cartesia": self.cartesia}.get(engine, self.omni)


class Manual:
    """The retrier's clock, moved by the test: starts at the wall clock's now."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Deleting:
    fakes: Fakes
    config: dict[str, Any]
    gateway: Gateway
    key: str
    group_id: int
    started: list[Gateway] = field(default_factory=list)

    def clocked(self, clock: Manual) -> Manual:
        """Run this gateway's retrier on ``clock``."""
        deletions = self.gateway.services.deletions
        assert deletions is not None
        deletions.clock = clock
        return clock

    async def restart(self) -> None:
        """A new gateway on the same database (the old one stopped first); the group's
        key is in that database too."""
        await self.gateway.stop()
        self.gateway = await Gateway.start(self.config)
        self.started.append(self.gateway)

    async def clone(self, engine: str, label: str) -> tuple[int, Any]:
        form = aiohttp.FormData()
        form.add_field("model", self.fakes.model(engine))
        form.add_field("label", label)
        form.add_field("consent", "cons_1")
        form.add_field("file", clip("wav", 4.0), filename="a.wav", content_type="audio/wav")
        return await self._send("POST", "/v1/audio/voices", data=form)

    async def delete(self, engine: str, voice_id: str) -> tuple[int, Any]:
        path = f"/v1/audio/voices/{voice_id}?model={self.fakes.model(engine)}"
        return await self._send("DELETE", path)

    async def listed(self, engine: str) -> list[str]:
        path = f"/v1/audio/voices?model={self.fakes.model(engine)}"
        _, body = await self._send("GET", path)
        return [voice["id"] for voice in body["voices"]]

    async def deletions(self) -> list[PendingDeletion]:
        return await self.gateway.services.store.list_deletions()

    async def _send(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.key}"}
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, self.gateway.base_url + path, headers=headers, **kwargs) as r,
        ):
            return r.status, await r.json()


def deletion_config(fakes: Fakes, workdir: Path, audio: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = hosted_config(fakes.eleven, fakes.cartesia, workdir)
    config["channels"].append(
        {
            "name": "omni",
            "type": "openai-audio",
            "base_url": fakes.omni.base_url,
            "api_key": OMNI_KEY,
            "models": [{"name": "tts-pro", "upstream": "qwen3-tts"}],
            "timeouts": {"connect": 2, "read": 10},
        }
    )
    config["models"].append(
        {"name": "tts-pro", "kind": "speech", "audio": {"cloning": True, "voice_listing": True}}
    )
    config["audio"] = audio
    config["admin"] = {"token": ADMIN}
    return config


Starter = Callable[[dict[str, Any]], Awaitable[Deleting]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Starter]:
    """Starts a gateway over the three fakes with the given ``audio`` settings."""
    runs: list[Deleting] = []
    async with (
        FakeElevenLabs(api_key=ELEVEN_KEY, echo_key_in_errors=True) as eleven,
        FakeCartesia(api_key=CARTESIA_KEY) as cartesia,
        FakeAudioEngine(api_key=OMNI_KEY, leak=True) as omni,
    ):
        fakes = Fakes(eleven, cartesia, omni)

        async def started(audio: dict[str, Any]) -> Deleting:
            config = deletion_config(fakes, tmp_path, audio)
            gateway = await Gateway.start(config)
            group = await gateway.group("alpha")
            run = Deleting(fakes, config, gateway, await gateway.key(group), group.id)
            run.started.append(gateway)
            runs.append(run)
            return run

        try:
            yield started
        finally:
            for run in runs:
                for gateway in run.started:
                    await gateway.stop()


def fast() -> dict[str, Any]:
    return {
        "clone_deletion_retry_seconds": FIRST,
        "clone_deletion_retry_max_seconds": LONGEST,
        "clone_deletion_scan_seconds": SCAN,
    }


async def rows_until_done(run: Deleting, seconds: float = 10.0) -> list[PendingDeletion]:
    """Every distinct state of the deletions seen (polled every 10 ms) until none is left."""
    seen: list[PendingDeletion] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        rows = await run.deletions()
        if not rows:
            return seen
        seen.extend(row for row in rows if row not in seen)
        await asyncio.sleep(0.01)
    raise AssertionError(f"deletions still pending after {seconds}s: {rows}")


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def without_key(text: str | None, key: str) -> bool:
    text = text or ""
    return key not in text and key[-12:] not in text and key[:12] not in text


# the caller, and the retries


async def attempted(run: Deleting, attempts: int) -> PendingDeletion:
    """The one deletion once it has failed ``attempts`` times (its attempt over: the row
    no longer holds that attempt's claim)."""
    found: list[PendingDeletion] = []

    async def check() -> bool:
        found[:] = await run.deletions()
        if len(found) != 1 or found[0].attempts != attempts:
            return False
        last = found[0].last_attempt_at
        return last is not None and found[0].next_attempt_at - last < timedelta(
            seconds=CLAIM_SECONDS
        )

    await until(check)
    return found[0]


@pytest.mark.parametrize("engine", ENGINES)
async def test_a_refused_deletion_is_done_for_the_caller_and_retried_until_the_engine_deletes(
    start: Starter, engine: str
) -> None:
    run = await start(fast())
    clock = run.clocked(Manual())
    fakes = run.fakes
    status, voice = await run.clone(engine, "Anna")
    assert status == 200, voice
    (clone,) = await run.gateway.services.store.list_clones()
    fakes.refuse(engine, 3)

    status, deleted = await run.delete(engine, voice["id"])
    assert status == 200 and deleted == {
        "id": voice["id"],
        "object": "audio.voice.deleted",
        "deleted": True,
    }
    assert voice["id"] not in await run.listed(engine), "gone for the caller at once"
    (first,) = await run.deletions()
    assert (first.voice_id, first.engine_name, first.channel) == (
        voice["id"],
        clone.engine_name,
        clone.channel,
    )
    assert first.attempts == 1 and fakes.holds(engine, clone.engine_name)
    assert first.last_attempt_at == clock.now
    assert first.next_attempt_at == clock.now + timedelta(seconds=FIRST)
    assert "[redacted]" in (first.last_error or ""), "the fake quoted the key"
    assert without_key(first.last_error, fakes.key(engine))

    clock.advance(FIRST - 1)
    await asyncio.sleep(5 * SCAN)
    assert await run.deletions() == [first], "not due yet: not tried"
    clock.advance(1)
    second = await attempted(run, 2)
    assert second.next_attempt_at == clock.now + timedelta(seconds=2 * FIRST)
    clock.advance(2 * FIRST)
    third = await attempted(run, 3)
    assert third.next_attempt_at == clock.now + timedelta(seconds=LONGEST), "capped"
    for row in (second, third):
        assert without_key(row.last_error, fakes.key(engine))
    assert fakes.holds(engine, clone.engine_name)
    clock.advance(LONGEST)
    await rows_until_done(run)
    assert not fakes.holds(engine, clone.engine_name)
    assert fakes.deletes(engine) == 4, "three refused, then deleted"
    assert await run.gateway.services.store.list_clones() == []


@pytest.mark.parametrize("engine", HOSTED)
async def test_a_voice_the_engine_no_longer_has_counts_as_deleted(
    start: Starter, engine: str
) -> None:
    run = await start(fast())
    clock = run.clocked(Manual())
    _, voice = await run.clone(engine, "Bo")
    (clone,) = await run.gateway.services.store.list_clones()
    run.fakes.refuse(engine, 1)
    assert (await run.delete(engine, voice["id"]))[0] == 200
    assert [row.attempts for row in await run.deletions()] == [1]
    run.fakes.forget(engine, clone.engine_name)  # another instance's attempt, say
    clock.advance(FIRST)
    await rows_until_done(run)
    assert run.fakes.deletes(engine) == 2, "the second attempt's 404 ended it"
    deletions = run.gateway.services.deletions
    assert deletions is not None and (deletions.deleted, deletions.failed) == (1, 1)


async def test_pending_deletions_survive_a_restart(start: Starter) -> None:
    run = await start(fast())
    clock = run.clocked(Manual())
    _, voice = await run.clone("elevenlabs", "Cy")
    (clone,) = await run.gateway.services.store.list_clones()
    run.fakes.refuse("elevenlabs", REFUSING)
    assert (await run.delete("elevenlabs", voice["id"]))[0] == 200
    clock.advance(FIRST)
    await attempted(run, 2)  # the next is 60 s away on this clock: none is under way
    await run.restart()
    (kept,) = await run.deletions()
    assert kept.attempts == 2 and run.fakes.holds("elevenlabs", clone.engine_name)
    run.fakes.refuse("elevenlabs", 0)
    later = run.clocked(Manual())
    later.now = clock.now + timedelta(seconds=2 * FIRST)
    await rows_until_done(run)
    assert not run.fakes.holds("elevenlabs", clone.engine_name)
    assert voice["id"] not in await run.listed("elevenlabs")


async def test_a_label_is_cloned_again_only_once_the_engine_deleted_the_old_voice(
    start: Starter,
) -> None:
    """The name-keyed engine holds one voice per name: the old one's late deletion must
    never take the new one."""
    run = await start(fast())
    clock = run.clocked(Manual())
    _, voice = await run.clone("openai-audio", "Dee")
    run.fakes.refuse("openai-audio", REFUSING)
    assert (await run.delete("openai-audio", voice["id"]))[0] == 200
    status, refused = await run.clone("openai-audio", "dee")
    assert status == 409 and refused["error"]["code"] == "voice_deletion_pending"
    assert run.fakes.holds("openai-audio", voice["id"].lower())
    run.fakes.refuse("openai-audio", 0)
    clock.advance(FIRST)
    await rows_until_done(run)
    status, again = await run.clone("openai-audio", "Dee")
    assert status == 200 and again["id"] == voice["id"]
    clock.advance(10 * LONGEST)
    await asyncio.sleep(5 * SCAN)  # a few more looks of the loop
    assert run.fakes.holds("openai-audio", voice["id"].lower())
    assert voice["id"] in await run.listed("openai-audio")


async def test_metrics_count_the_attempts_and_the_deletions_still_to_do(
    start: Starter,
) -> None:
    run = await start(fast())
    clock = run.clocked(Manual())
    _, voice = await run.clone("cartesia", "Eve")
    run.fakes.refuse("cartesia", 2)
    assert (await run.delete("cartesia", voice["id"]))[0] == 200
    await asyncio.sleep(5 * SCAN)  # the loop's next look counts the deletion pending
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{run.gateway.base_url}/metrics") as scrape:
            early = await scrape.text()
        assert 'parley_voice_deletion_attempts_total{outcome="failed"} 1.0' in early
        assert "parley_voice_deletions_pending 1.0" in early
        clock.advance(FIRST)
        await attempted(run, 2)
        clock.advance(2 * FIRST)
        await rows_until_done(run)
        await asyncio.sleep(5 * SCAN)  # the loop's look after the last attempt
        async with session.get(f"{run.gateway.base_url}/metrics") as scrape:
            late = await scrape.text()
    assert 'parley_voice_deletion_attempts_total{outcome="failed"} 2.0' in late
    assert 'parley_voice_deletion_attempts_total{outcome="deleted"} 1.0' in late
    assert "parley_voice_deletions_pending 0.0" in late


# the operator


async def test_the_operator_sees_retries_and_gives_up_deletions_audited(start: Starter) -> None:
    run = await start(SLOW)
    gateway, fakes = run.gateway, run.fakes
    _, anna = await run.clone("elevenlabs", "Anna")
    _, bo = await run.clone("elevenlabs", "Bo")
    engine_names = {c.voice_id: c.engine_name for c in await gateway.services.store.list_clones()}
    fakes.refuse("elevenlabs", REFUSING)
    assert (await run.delete("elevenlabs", anna["id"]))[0] == 200
    status, by_admin = await call(gateway, "DELETE", f"/admin/voices/tts-eleven/{bo['id']}")
    assert status == 200 and by_admin["deleted"] is True
    assert by_admin["pending_deletion"]["attempts"] == 1

    status, listing = await call(gateway, "GET", "/admin/voice-deletions")
    assert status == 200, listing
    rows = {row["voice_id"]: row for row in listing["data"]}
    assert set(rows) == {anna["id"], bo["id"]}
    row = rows[anna["id"]]
    assert row["object"] == "audio.voice.deletion" and row["group"] == "alpha"
    assert row["channel"] == "eleven" and row["engine_name"] == engine_names[anna["id"]]
    assert row["attempts"] == 1 and row["last_error"].startswith("HTTP 500")
    assert without_key(str(listing), ELEVEN_KEY)
    _, filtered = await call(gateway, "GET", "/admin/voice-deletions?model=tts-cartesia")
    assert filtered["data"] == []

    retry = f"/admin/voice-deletions/{row['id']}/retry"
    status, failed = await call(gateway, "POST", retry)
    assert status == 200 and failed["deleted"] is False and failed["attempts"] == 2
    fakes.refuse("elevenlabs", 0)
    status, done = await call(gateway, "POST", retry)
    assert status == 200 and done["deleted"] is True
    assert not fakes.holds("elevenlabs", engine_names[anna["id"]])
    assert (await call(gateway, "POST", retry))[0] == 404

    given_up = f"/admin/voice-deletions/{rows[bo['id']]['id']}"
    status, body = await call(gateway, "DELETE", given_up)
    assert status == 200 and body["abandoned"] is True and body["voice_id"] == bo["id"]
    assert fakes.holds("elevenlabs", engine_names[bo["id"]]), "given up: left on the engine"
    assert (await call(gateway, "GET", "/admin/voice-deletions"))[1]["data"] == []
    assert (await call(gateway, "DELETE", given_up))[0] == 404
    for method, path in (("GET", "/admin/voice-deletions"), ("POST", retry)):
        assert (await call(gateway, method, path, token=run.key))[0] == 401

    _, log = await call(gateway, "GET", "/admin/audit?action=voice.")
    entries = [e for e in log["data"] if e["action"].startswith("voice.")]
    actions = [(e["action"], e["detail"].get("outcome")) for e in entries]
    assert actions == [
        ("voice.deletion_abandon", None),
        ("voice.deletion_retry", "deleted"),
        ("voice.deletion_retry", "failed"),
        ("voice.delete", None),
    ]
    assert entries[0]["detail"]["attempts"] == 1 and entries[3]["detail"]["engine"] == "pending"
    assert without_key(str(log), ELEVEN_KEY)


async def test_the_voices_page_shows_deletions_to_retry_or_give_up(start: Starter) -> None:
    run = await start(SLOW)
    _, voice = await run.clone("cartesia", "Fay")
    run.fakes.refuse("cartesia", REFUSING)
    assert (await run.delete("cartesia", voice["id"]))[0] == 200
    (pending,) = await run.deletions()
    base = run.gateway.base_url
    async with browser_session() as session:
        await login(session, base, ADMIN)
        async with session.get(f"{base}/admin/ui/voices") as page:
            html = await page.text()
        assert page.status == 200 and "data-deletions" in html and voice["id"] in html
        assert "<title>Voices · Parley admin</title>" in html  # the table is in the page
        assert html.count("data-deletions") == 1
        assert "HTTP 502" in html and CARTESIA_KEY not in html
        form = {"csrf": hidden(html, "csrf"), "back": "/admin/ui/voices"}
        retry = f"{base}/admin/ui/voice-deletions/{pending.id}/retry"
        async with session.post(retry, data={"back": "/admin/ui/voices"}) as forged:
            assert forged.status == 403
        async with session.post(retry, data=form) as retried:
            assert retried.status == 200 and "data-deletions" in await retried.text()
        assert [row.attempts for row in await run.deletions()] == [2]
        abandon = f"{base}/admin/ui/voice-deletions/{pending.id}/abandon"
        async with session.post(abandon, data=form) as abandoned:
            assert abandoned.status == 200 and "data-deletions" not in await abandoned.text()
    assert await run.deletions() == []
