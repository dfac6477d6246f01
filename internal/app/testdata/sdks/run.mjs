// Runs the official npm SDKs against llmgw and prints, as one JSON
// object, what each call got: node run.mjs BASE_URL API_KEY MODEL, where
// BASE_URL is llmgw's OpenAI base (ending in /v1).
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const [baseURL, apiKey, model] = process.argv.slice(2);
const openai = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });
const anthropic = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ""), apiKey, maxRetries: 0, timeout: 30000 });

const question = "What is the weather in Paris?";
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

// chatWhole is a chat completion, whole.
async function chatWhole() {
  const r = await openai.chat.completions.create({ model, max_tokens: 64, messages: [{ role: "user", content: question }] });
  const c = r.choices[0];
  return { content: c.message.content, finish: c.finish_reason, usage: r.usage };
}

// chatStreamTool is a streamed chat completion offered a tool, read
// through the SDK's stream helper; its usage is the chunk's that has one,
// which the helper's accumulated completion leaves out; events counts
// the chunks read.
async function chatStreamTool() {
  const stream = openai.chat.completions.stream({
    model, max_tokens: 64, messages: [{ role: "user", content: question }], tools: [weather],
    stream_options: { include_usage: true },
  });
  let usage = null;
  let events = 0;
  stream.on("chunk", (chunk) => {
    events++;
    if (chunk.usage) usage = chunk.usage;
  });
  const r = await stream.finalChatCompletion();
  const c = r.choices[0];
  const calls = (c.message.tool_calls || []).map((t) => ({ id: t.id, name: t.function.name, arguments: t.function.arguments }));
  return { content: c.message.content, finish: c.finish_reason, tool_calls: calls, usage, events };
}

// responsesWhole is a Responses call, whole.
async function responsesWhole() {
  const r = await openai.responses.create({ model, max_output_tokens: 64, input: question });
  return { content: r.output_text, status: r.status, usage: r.usage };
}

// messagesWhole is a Messages call, whole.
async function messagesWhole() {
  const r = await anthropic.messages.create({ model, max_tokens: 64, messages: [{ role: "user", content: question }] });
  return { content: r.content.filter((b) => b.type === "text").map((b) => b.text).join(""), stop: r.stop_reason, usage: r.usage };
}

// messagesStream is a streamed Messages call, read through the SDK's
// stream helper, counting the events it read.
async function messagesStream() {
  const stream = anthropic.messages.stream({ model, max_tokens: 64, messages: [{ role: "user", content: question }] });
  let events = 0;
  stream.on("streamEvent", () => events++);
  const r = await stream.finalMessage();
  return { content: r.content.filter((b) => b.type === "text").map((b) => b.text).join(""), stop: r.stop_reason, usage: r.usage, events };
}

const out = {};
for (const [name, call] of Object.entries({ chatWhole, chatStreamTool, responsesWhole, messagesWhole, messagesStream })) {
  try {
    out[name] = await call();
  } catch (err) {
    out[name] = { error: String(err) };
  }
}
process.stdout.write(JSON.stringify(out) + "\n");
