// The official openai package's Responses API against the proxy: each case once whole
// (`client.responses.create`) and once streamed (`client.responses.stream`, read to its `finalResponse()`).
// Reads {baseURL, apiKey, cases: [{model, input, tools}]} as JSON on stdin and prints {results: [{model, whole,
// final, events, errors}]} for tests/test_node_responses.py. A client error is printed, not thrown.
import OpenAI from "openai";

async function readStdin() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function run(client, testCase) {
  const result = { model: testCase.model, whole: null, final: null, events: [], errors: [] };
  try {
    result.whole = await client.responses.create(testCase);
    const stream = client.responses.stream(testCase);
    for await (const event of stream) {
      result.events.push({ type: event.type, sequence_number: event.sequence_number, item_id: event.item?.id });
    }
    result.final = await stream.finalResponse();
  } catch (error) {
    result.errors.push(String(error));
  }
  return result;
}

const input = await readStdin();
const client = new OpenAI({ baseURL: input.baseURL, apiKey: input.apiKey, maxRetries: 0 });
const results = [];
for (const testCase of input.cases) results.push(await run(client, testCase));
process.stdout.write(JSON.stringify({ results }));
