// The Vercel AI SDK, unmodified, against Parley: `openai(model)` from @ai-sdk/openai
// (the Responses API by default), generateText, streamText, a tool round trip and a
// reasoning model's reasoning. Reads PARLEY_BASE_URL, PARLEY_KEY, PARLEY_MODEL,
// PARLEY_TOOL_MODEL and PARLEY_REASONING_MODEL; prints one JSON line of results.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, tool, stepCountIs } from "ai";
import { z } from "zod";

const openai = createOpenAI({
  baseURL: process.env.PARLEY_BASE_URL,
  apiKey: process.env.PARLEY_KEY,
});
const model = process.env.PARLEY_MODEL;
const toolModel = process.env.PARLEY_TOOL_MODEL;
const reasoningModel = process.env.PARLEY_REASONING_MODEL;

const whole = await generateText({ model: openai(model), prompt: "hello from vercel" });

const streamed = streamText({ model: openai(model), prompt: "stream from vercel" });
const pieces = [];
for await (const piece of streamed.textStream) pieces.push(piece);

const asked = [];
const withTool = await generateText({
  model: openai(toolModel),
  prompt: "weather in Rome",
  tools: {
    weather: tool({
      description: "The weather for a query naming a city.",
      inputSchema: z.object({ query: z.string() }),
      execute: async ({ query }) => {
        asked.push(query);
        return "sunny";
      },
    }),
  },
  stopWhen: stepCountIs(3),
});

const thought = await generateText({ model: openai(reasoningModel), prompt: "think" });
const thinking = streamText({ model: openai(reasoningModel), prompt: "think" });
await thinking.consumeStream();

console.log(
  JSON.stringify({
    whole: { text: whole.text, usage: whole.usage, finishReason: whole.finishReason },
    streamed: { pieces, text: await streamed.text, usage: await streamed.usage },
    tool: { asked, text: withTool.text, steps: withTool.steps.length },
    reasoning: { whole: thought.reasoningText, streamed: await thinking.reasoningText },
  }),
);
