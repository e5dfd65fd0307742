"""The dashboard's Realtime pages in Debian's Chromium, against a fake OpenAI Realtime
upstream over a real WebSocket.

The talk page: an operator picks a key and a realtime model, the page gets a client
secret from the dashboard (never the key), Chromium's fake microphone plays a WAV (a
second of silence, a 440 Hz tone, silence), the page sends it as PCM16 at 24 kHz, the
fake upstream hears the tone as speech and answers, and the page shows the reply's
transcript and plays its audio. The tone the upstream received is still 440 Hz (so the
page's resampling is right), and the turn is in the request log under the session's id,
billed. The live sessions page lists a session while it is open, and a group-admin sees
their group's alone.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import math
import struct
import wave
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import Browser, Page, async_playwright, expect

from parley.domain.realtime_sessions import session_of
from tests.api.harness import CHANNEL_KEY, Gateway, call, records
from tests.api.test_realtime import MODEL, connect, realtime_config, transcriber
from tests.browser.conftest import ADMIN_TOKEN, CHROMIUM_ARGS
from tests.browser.test_accessibility import severe_violations
from tests.browser.test_dashboard import sign_in, snap
from tests.upstreams.realtime import TRANSCRIPT, FakeRealtime

TONE_HZ = 440
WAV_RATE = 48_000
FORGED_POST = """async () => (await fetch("/admin/ui/realtime/talk", {
  method: "POST", body: new URLSearchParams({key: "1", model: "voice-rt"})})).status"""
SIGNED_POST = """async (key) => {
  const csrf = document.querySelector("input[name=csrf]").value;
  const body = new URLSearchParams({csrf, key, model: "voice-rt"});
  const reply = await fetch("/admin/ui/realtime/talk", {method: "POST", body});
  return [reply.status, await reply.json()];
}"""
SIDEWAYS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def talking_wav(path: Path) -> Path:
    """A second of silence, 3 s of a 440 Hz tone, then 2 s of silence (16-bit mono): the
    page may take a moment to start sending, and still sends most of the tone."""
    samples = [0] * WAV_RATE
    samples += [
        round(12_000 * math.sin(2 * math.pi * TONE_HZ * n / WAV_RATE)) for n in range(WAV_RATE * 3)
    ]
    samples += [0] * (WAV_RATE * 2)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(WAV_RATE)
        out.writeframes(struct.pack(f"<{len(samples)}h", *samples))
    return path


@pytest.fixture
async def upstream() -> AsyncIterator[FakeRealtime]:
    async with FakeRealtime(api_key=CHANNEL_KEY) as running:
        yield running


@pytest.fixture
async def gateway(upstream: FakeRealtime, tmp_path: Path) -> AsyncIterator[Gateway]:
    config = realtime_config(upstream, tmp_path)
    transcriber(config)
    config["admin"] = {"token": ADMIN_TOKEN}
    started = await Gateway.start(config)
    try:
        yield started
    finally:
        await started.stop()


@pytest.fixture
async def microphone_browser(chromium: Path, tmp_path: Path) -> AsyncIterator[Browser]:
    """Chromium with a fake microphone that plays ``talking_wav`` once."""
    wav = talking_wav(tmp_path / "talking.wav")
    args = [
        *CHROMIUM_ARGS,
        "--use-fake-ui-for-media-stream",
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={wav}%noloop",
        "--autoplay-policy=no-user-gesture-required",
    ]
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(chromium), headless=True, args=args
        )
        yield launched
        await launched.close()


def tone_hz(pcm: bytes, rate: int = 24_000) -> float:
    """The frequency of the loud part of ``pcm`` (16-bit, ``rate``), by zero crossings."""
    samples = struct.unpack(f"<{len(pcm) // 2}h", pcm[: len(pcm) // 2 * 2])
    loud = [n for n, value in enumerate(samples) if abs(value) > 2000]
    assert loud, "no tone reached the upstream"
    tone = samples[loud[0] : loud[-1]]
    crossings = sum(1 for a, b in itertools.pairwise(tone) if (a < 0) != (b < 0))
    return crossings / 2 / (len(tone) / rate)


async def live_rows(page: Page, base: str) -> list[str]:
    """The ids of the sessions the Realtime page lists now."""
    await page.goto(f"{base}/admin/ui/realtime")
    rows = page.locator("table[data-live-sessions] tbody tr")
    return [str(await row.get_attribute("data-session")) for row in await rows.all()]


async def test_an_operator_talks_to_a_realtime_model_from_the_browser(
    microphone_browser: Browser, gateway: Gateway, upstream: FakeRealtime, artifacts: Path
) -> None:
    secret = await gateway.key(await gateway.group("acme"))
    context = await microphone_browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await sign_in(page, gateway.base_url, ADMIN_TOKEN)
    await page.get_by_role("link", name="Realtime").click()
    await expect(page.locator("[data-no-sessions]")).to_be_visible()
    await page.get_by_role("link", name="Talk to a model").click()
    await page.get_by_label("Model").select_option(MODEL)
    await page.get_by_label("Transcribe my speech with").select_option("stt")
    await page.get_by_label("Instructions").fill("Be brief.")
    await page.get_by_role("button", name="Start talking").click()

    reply = page.locator("[data-transcript] li[data-who='model'] [data-said]")
    await expect(reply).to_have_text(" ".join(TRANSCRIPT.split(" ")[:3]) + " ", timeout=15_000)
    heard = page.locator("[data-transcript] li[data-who='you'] [data-said]")
    await expect(heard).to_have_text("Hi")
    await expect(page.locator("[data-played]")).to_have_text("3", timeout=5_000)
    await expect(page.locator("[data-talk-error]")).to_be_hidden()
    assert secret not in await page.content()
    await snap(page, artifacts, "talk")

    # what reached the upstream: the session bound to the secret, then the microphone
    (session,) = upstream.connections
    update = session.of_type("session.update")[0]["session"]
    assert update["instructions"] == "Be brief."
    assert update["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24_000}
    assert update["audio"]["input"]["transcription"] == {"model": "gpt-4o-transcribe"}
    appended = b"".join(
        base64.b64decode(event["audio"]) for event in session.of_type("input_audio_buffer.append")
    )
    assert len(session.of_type("input_audio_buffer.append")) >= 10
    assert abs(tone_hz(appended) - TONE_HZ) < TONE_HZ * 0.03

    # the session is listed while open, with its turn
    listing = await context.new_page()
    (open_id,) = await live_rows(listing, gateway.base_url)
    row = listing.locator(f"tr[data-session='{open_id}']")
    await expect(row).to_contain_text(MODEL)
    await expect(row).to_contain_text("acme")
    await expect(row.locator("[data-turns]")).to_have_text("1")
    await snap(listing, artifacts, "realtime-sessions")

    await page.get_by_role("button", name="Stop").click()
    await expect(page.locator("[data-talk-status]")).to_have_text("Stopped.")
    await page.wait_for_timeout(500)  # the socket's own close event comes after, says nothing
    await expect(page.locator("[data-talk-status]")).to_have_text("Stopped.")
    for _ in range(100):
        if not await live_rows(listing, gateway.base_url):
            break
        await asyncio.sleep(0.05)
    await expect(listing.locator("[data-no-sessions]")).to_be_visible()

    # the turn and the input's transcription, billed, under the session's id
    await gateway.flush_usage()
    lines = [r for r in await records(gateway) if r.endpoint == "/v1/realtime"]
    assert {session_of(r.request_id) for r in lines} == {open_id}
    turn = next(r for r in lines if r.model == MODEL)
    assert turn.status == 200 and turn.cost_nanos > 0 and turn.completion_tokens > 0
    assert any(r.model == "stt" and r.cost_nanos > 0 for r in lines)
    await listing.goto(f"{gateway.base_url}/admin/ui/requests?session={open_id}")
    logged = listing.locator("table[data-requests] tbody tr")
    await expect(logged).to_have_count(len(lines))
    await expect(logged.locator("[data-session]")).to_have_count(len(lines))
    await expect(listing.get_by_label("Realtime session")).to_have_value(open_id)
    await snap(listing, artifacts, "requests-session")
    await logged.first.locator("a").first.click()
    await expect(listing.locator("dd a[data-session]")).to_have_text(open_id)
    _, audit = await call(gateway, "GET", "/admin/audit?action=realtime.talk", ADMIN_TOKEN)
    assert [entry["detail"]["model"] for entry in audit["data"]] == [MODEL]

    await page.set_viewport_size({"width": 390, "height": 844})
    assert await page.evaluate(SIDEWAYS) <= 0


async def test_the_talk_page_refuses_a_model_the_key_may_not_use(
    microphone_browser: Browser, gateway: Gateway, upstream: FakeRealtime
) -> None:
    await gateway.key(await gateway.group("text-only", models=["stt"]))
    page = await (await microphone_browser.new_context()).new_page()
    await sign_in(page, gateway.base_url, ADMIN_TOKEN)
    await page.goto(f"{gateway.base_url}/admin/ui/realtime/talk")
    await page.get_by_role("button", name="Start talking").click()
    await expect(page.locator("[data-talk-error]")).to_contain_text(f"`{MODEL}` does not exist")
    forged = await page.evaluate(FORGED_POST)  # a post without the session's CSRF token
    assert forged == 403
    assert not upstream.connections
    _, audit = await call(gateway, "GET", "/admin/audit?action=realtime.talk", ADMIN_TOKEN)
    assert audit["data"] == []


async def test_without_a_microphone_no_secret_is_made(
    browser: Browser, gateway: Gateway, upstream: FakeRealtime
) -> None:
    await gateway.key(await gateway.group("acme"))
    page = await (await browser.new_context()).new_page()  # Chromium with no audio device
    await sign_in(page, gateway.base_url, ADMIN_TOKEN)
    await page.goto(f"{gateway.base_url}/admin/ui/realtime/talk")
    await page.get_by_role("button", name="Start talking").click()
    await expect(page.locator("[data-talk-error]")).to_be_visible()
    await expect(page.locator("[data-talk-status]")).to_have_text("Not connected.")
    await expect(page.get_by_role("button", name="Start talking")).to_be_enabled()
    _, audit = await call(gateway, "GET", "/admin/audit?action=realtime.talk", ADMIN_TOKEN)
    assert audit["data"] == [] and not upstream.connections


async def test_live_sessions_are_listed_while_open_and_a_group_admin_sees_its_own(
    browser: Browser, gateway: Gateway, artifacts: Path
) -> None:
    mine, theirs = await gateway.group("acme"), await gateway.group("zeta-corp")
    body = {"name": "gina", "role": "group-admin", "group": "acme", "password": "gina-pw-0123"}
    status, _ = await call(gateway, "POST", "/admin/accounts", ADMIN_TOKEN, json=body)
    assert status in (200, 201)
    operator = await (await browser.new_context()).new_page()
    await sign_in(operator, gateway.base_url, ADMIN_TOKEN)
    gina = await (await browser.new_context()).new_page()
    await gina.goto(f"{gateway.base_url}/admin/")
    await gina.get_by_label("Account name").fill("gina")
    await gina.get_by_label("Password or admin token").fill("gina-pw-0123")
    await gina.get_by_role("button", name="Sign in").click()
    await expect(gina.get_by_role("link", name="Realtime")).to_be_visible()

    async with aiohttp.ClientSession() as http:
        ours = await connect(gateway, await gateway.key(mine), http)
        other = await connect(gateway, await gateway.key(theirs), http)
        await ours.until("session.created")
        await other.until("session.created")
        live = gateway.services.live_sessions.sessions()
        by_group = {entry.group: entry.id for entry in live}
        assert set(await live_rows(operator, gateway.base_url)) == set(by_group.values())
        assert await live_rows(gina, gateway.base_url) == [by_group["acme"]]
        assert "zeta-corp" not in await gina.content()
        assert await severe_violations(Axe(), gina) == []
        await snap(gina, artifacts, "realtime-group-admin")

        await ours.socket.close()
        for _ in range(100):
            if len(gateway.services.live_sessions) == 1:
                break
            await asyncio.sleep(0.02)
        assert await live_rows(operator, gateway.base_url) == [by_group["zeta-corp"]]
        assert await live_rows(gina, gateway.base_url) == []
        await other.socket.close()

    # a group-admin's talk page offers its own group's keys alone
    await gina.goto(f"{gateway.base_url}/admin/ui/realtime/talk")
    options = await gina.get_by_label("Key").locator("option").all_inner_texts()
    assert options and all(text.startswith("acme · ") for text in options)
    assert await severe_violations(Axe(), gina) == []
    # and another group's key, named by its id, is not found
    (their_key,) = await gateway.services.store.list_keys(theirs.id)
    status, reply = await gina.evaluate(SIGNED_POST, str(their_key.id))
    assert status == 404 and reply["error"]["message"] == f"No key with id '{their_key.id}'."
    (own_key,) = await gateway.services.store.list_keys(mine.id)
    status, made = await gina.evaluate(SIGNED_POST, str(own_key.id))
    assert status == 200 and made["value"].startswith("ek_") and made["model"] == MODEL
    _, audit = await call(gateway, "GET", "/admin/audit?action=realtime.talk", ADMIN_TOKEN)
    assert [(e["actor"], e["detail"]["group"]) for e in audit["data"]] == [("gina", "acme")]
