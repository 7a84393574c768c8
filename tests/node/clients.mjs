// Drives the proxy with a real JavaScript client, each case twice: one whole answer, then a stream read as
// the client's users read it. Reads {client, baseURL, apiKey, cases: [{model, messages, tools}]} as JSON on
// stdin and prints {results: [{model, whole, stream}]}, each side as {content, calls, finish, errors}, for
// tests/test_node_clients.py to compare (the Anthropic client adds the message itself, for
// tests/test_messages_node.py). A client error is printed, not thrown: the test shows it.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import Anthropic from "@anthropic-ai/sdk";
import { generateText, jsonSchema, streamText, tool } from "ai";
import OpenAI from "openai";

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

// --- the official openai package ---------------------------------------------------------------------------

async function openaiWhole(client, testCase) {
  const answer = await client.chat.completions.create({ ...testCase, stream: false });
  const choice = answer.choices[0];
  const calls = (choice.message.tool_calls ?? []).map((call) => ({
    id: call.id, name: call.function.name, arguments: JSON.parse(call.function.arguments),
  }));
  return { content: choice.message.content, calls, finish: choice.finish_reason, errors: [] };
}

async function openaiStream(client, testCase) {
  const stream = await client.chat.completions.create({ ...testCase, stream: true });
  let content = "";
  let finish = null;
  const slots = new Map();
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? "";
      for (const delta of choice.delta.tool_calls ?? []) {
        const slot = slots.get(delta.index) ?? { id: "", name: "", arguments: "" };
        slot.id += delta.id ?? "";
        slot.name += delta.function?.name ?? "";
        slot.arguments += delta.function?.arguments ?? "";
        slots.set(delta.index, slot);
      }
      finish = choice.finish_reason ?? finish;
    }
  }
  const calls = [...slots.values()].map((slot) => ({ ...slot, arguments: JSON.parse(slot.arguments) }));
  return { content, calls, finish, errors: [] };
}

// --- the Vercel AI SDK with @ai-sdk/openai-compatible (the layer OpenCode and Kilo are built on) -----------

function sdkTools(tools) {
  // No `execute`: the SDK returns the calls and stops, as an agent's first step does.
  return Object.fromEntries((tools ?? []).map(({ function: fn }) => [
    fn.name, tool({ description: fn.description, inputSchema: jsonSchema(fn.parameters) }),
  ]));
}

function sdkCall(part) {
  return { id: part.toolCallId, name: part.toolName, arguments: part.input, invalid: part.invalid ?? false };
}

async function sdkWhole(model, testCase) {
  const answer = await generateText({ model, messages: testCase.messages, tools: sdkTools(testCase.tools) });
  return { content: answer.text, calls: answer.toolCalls.map(sdkCall), finish: answer.finishReason, errors: [] };
}

async function sdkStream(model, testCase) {
  const errors = [];
  const answer = streamText({
    model, messages: testCase.messages, tools: sdkTools(testCase.tools),
    onError: ({ error }) => errors.push(String(error)),
  });
  let content = "";
  let finish = null;
  const calls = [];
  for await (const part of answer.fullStream) {
    if (part.type === "text-delta") content += part.text;
    else if (part.type === "tool-call") calls.push(sdkCall(part));
    else if (part.type === "finish") finish = part.finishReason;
  }
  return { content, calls, finish, errors };
}

// --- the official @anthropic-ai/sdk package (Anthropic's Messages API, as Claude Code speaks it) ------------

function anthropicResult(message) {
  const text = message.content.filter((block) => block.type === "text").map((block) => block.text).join("");
  const calls = message.content.filter((block) => block.type === "tool_use")
    .map((block) => ({ id: block.id, name: block.name, arguments: block.input }));
  return { content: text || null, calls, finish: message.stop_reason, errors: [], message };
}

async function anthropicWhole(client, testCase) {
  return anthropicResult(await client.messages.create({ ...testCase, stream: false }));
}

async function anthropicStream(client, testCase) {
  const stream = client.messages.stream(testCase);
  let streamedText = "";
  stream.on("text", (delta) => { streamedText += delta; });
  const message = await stream.finalMessage();
  const { input_tokens: counted } = await client.messages.countTokens({ model: testCase.model,
    messages: testCase.messages, tools: testCase.tools });
  return { ...anthropicResult(message), streamedText, counted };
}

// --- driver ------------------------------------------------------------------------------------------------

function sides(input) {
  if (input.client === "anthropic") {
    const client = new Anthropic({ baseURL: input.baseURL, apiKey: input.apiKey, maxRetries: 0 });
    return [(c) => anthropicWhole(client, c), (c) => anthropicStream(client, c)];
  }
  if (input.client === "openai") {
    const client = new OpenAI({ baseURL: input.baseURL, apiKey: input.apiKey, maxRetries: 0 });
    return [(c) => openaiWhole(client, c), (c) => openaiStream(client, c)];
  }
  const provider = createOpenAICompatible({ name: "toolproxy", baseURL: input.baseURL, apiKey: input.apiKey });
  return [(c) => sdkWhole(provider(c.model), c), (c) => sdkStream(provider(c.model), c)];
}

async function settle(run) {
  try {
    return await run();
  } catch (error) {
    return { content: null, calls: [], finish: null, errors: [String(error)] };
  }
}

const input = await readStdin();
const [whole, stream] = sides(input);
const results = [];
for (const testCase of input.cases) {
  results.push({
    model: testCase.model,
    whole: await settle(() => whole(testCase)),
    stream: await settle(() => stream(testCase)),
  });
}
process.stdout.write(JSON.stringify({ results }));
