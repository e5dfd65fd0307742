// Parley admin, talk page: the microphone's samples, handed to the page in blocks of
// about 40 ms (an AudioWorklet runs on the audio thread; the page converts and sends).
"use strict";

const BLOCK = 2048;

class ParleyCapture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.block = new Float32Array(BLOCK);
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (!channel) return true;
    let read = 0;
    while (read < channel.length) {
      const take = Math.min(channel.length - read, BLOCK - this.filled);
      this.block.set(channel.subarray(read, read + take), this.filled);
      this.filled += take;
      read += take;
      if (this.filled === BLOCK) {
        this.port.postMessage(this.block);
        this.block = new Float32Array(BLOCK);
        this.filled = 0;
      }
    }
    return true;
  }
}

registerProcessor("parley-capture", ParleyCapture);
