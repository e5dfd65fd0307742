// Parley admin, talk page: a realtime session from the browser. The page asks the
// dashboard for a client secret (never a key), opens /v1/realtime with it, sends the
// microphone as PCM16 at 24 kHz (input_audio_buffer.append), plays the reply's audio
// with Web Audio, and shows the transcripts and errors. No inline script (the CSP).
"use strict";

const RATE = 24000;
const CHUNK_SAMPLES = RATE / 10; // one append every 100 ms of audio

// Float samples at the context's rate to 16-bit samples at 24 kHz: each output sample is
// the mean of the input samples it spans (downsampling), or between two (upsampling).
class Resampler {
  constructor(from) {
    this.step = from / RATE;
    this.held = new Float32Array(0);
    this.at = 0;
  }

  push(input) {
    const all = new Float32Array(this.held.length + input.length);
    all.set(this.held);
    all.set(input, this.held.length);
    const out = [];
    let at = this.at;
    const step = this.step;
    while (at + Math.max(step, 1) < all.length) {
      let value;
      if (step >= 1) {
        const start = Math.floor(at);
        const end = Math.max(start + 1, Math.floor(at + step));
        let sum = 0;
        for (let i = start; i < end; i++) sum += all[i];
        value = sum / (end - start);
      } else {
        const index = Math.floor(at);
        const part = at - index;
        value = all[index] * (1 - part) + all[index + 1] * part;
      }
      out.push(Math.max(-32768, Math.min(32767, Math.round(value * 32767))));
      at += step;
    }
    const keep = Math.floor(at);
    this.held = all.slice(keep);
    this.at = at - keep;
    return Int16Array.from(out);
  }
}

function toBase64(samples) {
  const bytes = new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

function fromBase64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length - (raw.length % 2));
  for (let i = 0; i < bytes.length; i++) bytes[i] = raw.charCodeAt(i);
  return new Int16Array(bytes.buffer);
}

class Talk {
  constructor(form) {
    this.form = form;
    const section = document.querySelector("[data-transcript]").closest("section");
    this.status = section.querySelector("[data-talk-status]");
    this.error = section.querySelector("[data-talk-error]");
    this.transcript = section.querySelector("[data-transcript]");
    this.sentOut = section.querySelector("[data-sent]");
    this.playedOut = section.querySelector("[data-played]");
    this.secondsOut = section.querySelector("[data-played-seconds]");
    this.start = form.querySelector("[data-start]");
    this.stop = form.querySelector("[data-stop]");
    this.lines = new Map();
    this.sources = new Set();
    this.sent = 0;
    this.played = 0;
    this.playedSeconds = 0;
    form.addEventListener("submit", (event) => { event.preventDefault(); this.open(); });
    this.stop.addEventListener("click", () => this.close("Stopped."));
  }

  say(text) { this.status.textContent = text; }

  fail(text) {
    this.error.textContent = text;
    this.error.hidden = false;
  }

  async open() {
    this.error.hidden = true;
    this.start.disabled = true;
    try {
      if (this.context) this.context.close();
      this.context = new AudioContext();
      await this.context.resume();
      this.say("Asking for the microphone…");
      this.stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true },
      });
      this.say("Asking for a client secret…");
      const secret = await this.secret();
      this.say("Connecting…");
      const scheme = location.protocol === "https:" ? "wss:" : "ws:";
      const url = `${scheme}//${location.host}/v1/realtime?model=${encodeURIComponent(secret.model)}`;
      const socket = new WebSocket(url, ["realtime", `openai-insecure-api-key.${secret.value}`]);
      this.socket = socket;
      this.socket.addEventListener("message", (event) => this.heard(event.data));
      this.socket.addEventListener("close", (event) => this.ended(socket, event));
      this.socket.addEventListener("open", () => this.capture());
      this.stop.disabled = false;
    } catch (problem) {
      this.fail(problem.message || String(problem));
      this.close("Not connected.");
    }
  }

  async secret() {
    const reply = await fetch("/admin/ui/realtime/talk", {
      method: "POST",
      body: new URLSearchParams(new FormData(this.form)),
      credentials: "same-origin",
    });
    const type = reply.headers.get("Content-Type") || "";
    if (!type.startsWith("application/json")) {
      throw new Error(`The dashboard refused (${reply.status}): reload the page and try again.`);
    }
    const body = await reply.json();
    if (!reply.ok) throw new Error(body.error.message);
    return body;
  }

  async capture() {
    const context = this.context;
    await context.audioWorklet.addModule("/admin/static/talk-capture.js");
    const source = context.createMediaStreamSource(this.stream);
    this.worklet = new AudioWorkletNode(context, "parley-capture");
    const resampler = new Resampler(context.sampleRate);
    let pending = [];
    let count = 0;
    this.worklet.port.onmessage = (event) => {
      const samples = resampler.push(event.data);
      pending.push(samples);
      count += samples.length;
      if (count < CHUNK_SAMPLES) return;
      const chunk = new Int16Array(count);
      let at = 0;
      for (const part of pending) { chunk.set(part, at); at += part.length; }
      pending = [];
      count = 0;
      this.send({ type: "input_audio_buffer.append", audio: toBase64(chunk) });
      this.sent += 1;
      this.sentOut.textContent = String(this.sent);
    };
    source.connect(this.worklet);
    this.playhead = context.currentTime;
    this.say("Listening: speak now.");
  }

  send(event) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(event));
    }
  }

  heard(data) {
    let event;
    try { event = JSON.parse(data); } catch (problem) { return; }
    switch (event.type) {
      case "response.output_audio.delta":
        this.play(event.delta);
        break;
      case "response.output_audio_transcript.delta":
      case "response.output_text.delta":
        this.line(`reply:${event.response_id}:${event.item_id}`, "model", event.delta, true);
        break;
      case "conversation.item.input_audio_transcription.delta":
        this.line(`input:${event.item_id}`, "you", event.delta, true);
        break;
      case "conversation.item.input_audio_transcription.completed":
        this.line(`input:${event.item_id}`, "you", event.transcript || "", false);
        break;
      case "input_audio_buffer.speech_started":
        this.hush();
        this.say("Hearing you…");
        break;
      case "response.created":
        this.say("The model is answering…");
        break;
      case "response.done":
        this.say("Listening: speak now.");
        break;
      case "error": {
        const error = event.error || {};
        this.fail(`${error.code || error.type || "error"}: ${error.message || "no message"}`);
        break;
      }
      default:
        break;
    }
  }

  line(key, who, text, adding) {
    let entry = this.lines.get(key);
    if (!entry) {
      entry = document.createElement("li");
      entry.dataset.who = who;
      const label = document.createElement("strong");
      label.textContent = who === "you" ? "You: " : "Model: ";
      const said = document.createElement("span");
      said.dataset.said = "";
      entry.append(label, said);
      this.transcript.append(entry);
      this.lines.set(key, entry);
    }
    const said = entry.querySelector("[data-said]");
    said.textContent = adding ? said.textContent + text : text;
  }

  play(delta) {
    const samples = fromBase64(delta);
    if (!samples.length || !this.context) return;
    const buffer = this.context.createBuffer(1, samples.length, RATE);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 32768;
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const at = Math.max(this.context.currentTime, this.playhead || 0);
    source.start(at);
    this.playhead = at + buffer.duration;
    this.sources.add(source);
    source.addEventListener("ended", () => {
      if (!this.sources.delete(source)) return; // stopped by a barge-in: not played
      this.played += 1;
      this.playedSeconds += buffer.duration;
      this.playedOut.textContent = String(this.played);
      this.secondsOut.textContent = this.playedSeconds.toFixed(1);
    });
  }

  hush() {
    // The caller speaks over the reply: what is still to play is dropped.
    const playing = [...this.sources];
    this.sources.clear();
    for (const source of playing) source.stop();
    if (this.context) this.playhead = this.context.currentTime;
  }

  ended(socket, event) {
    // A socket the page closed itself (Stop, a new session) says nothing more.
    if (socket !== this.socket) return;
    const why = event.reason ? `: ${event.reason}` : "";
    this.close(`Session ended (${event.code}${why}).`);
  }

  close(text) {
    if (this.socket) {
      const socket = this.socket;
      this.socket = null;
      if (socket.readyState <= WebSocket.OPEN) socket.close(1000);
    }
    if (this.worklet) { this.worklet.port.onmessage = null; this.worklet.disconnect(); }
    if (this.stream) this.stream.getTracks().forEach((track) => track.stop());
    this.worklet = null;
    this.stream = null;
    this.start.disabled = false;
    this.stop.disabled = true;
    this.say(text);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const form = document.querySelector("[data-talk-form]");
  if (form) window.parleyTalk = new Talk(form);
});
