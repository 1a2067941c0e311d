// openai-node drives tether with OpenAI's official Node SDK (the `openai`
// npm package) over one WebSocket, its Responses WebSocket client
// (ResponsesWS from 'openai/resources/responses/ws', which runs on the `ws`
// package):
//
//  1. two cached-state turns, the shipped WebSocket mode: the model calls a
//     function tool, and the next response.create sends only the tool's
//     output with previous_response_id;
//  2. a suspended rollout (tether's extension) on the same connection. The
//     SDK has no type for it, but it needs none: ws.send() sends a
//     response.create object as it is (here with "suspend": true),
//     ws.stream() yields every server event, including response.done
//     (status requires_action) which the SDK does not model, and
//     ws.sendRaw() sends the response.append.
//
// Run a server in one shell and the example in another:
//
//   go run ./cmd/tether serve --addr 127.0.0.1:8080 --tps 300
//   cd examples/openai-node && npm ci && node index.mjs
//
// --url URL (default $TETHER_URL, else http://127.0.0.1:8080/v1) points it
// at another server.
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { z } from 'zod';

const model = 'tether-scripted';

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the current weather for a location.',
  parameters: {
    type: 'object',
    properties: { location: { type: 'string' } },
    required: ['location'],
  },
  strict: false,
};

// weather is the client side of the get_weather tool.
function weather(args) {
  try {
    return `Sunny, 21°C in ${JSON.parse(args).location}`;
  } catch (err) {
    return `error: ${err.message}`;
  }
}

function baseURL() {
  const i = process.argv.indexOf('--url');
  if (i >= 0) {
    if (!process.argv[i + 1]) throw new Error('--url needs a value');
    return process.argv[i + 1];
  }
  return process.env.TETHER_URL || 'http://127.0.0.1:8080/v1';
}

const ms = (start) => `${(performance.now() - start).toFixed(1)}ms`;

// Events reads the server events of one ResponsesWS in order.
class Events {
  constructor(ws) {
    this.it = ws.stream(); // subscribe before sending: events are not buffered for later iterators
  }

  // next returns the next server event, error events included; a socket
  // error or close throws.
  async next() {
    for (;;) {
      const { value, done } = await this.it.next();
      if (done) throw new Error('the connection closed');
      switch (value.type) {
        case 'message':
          return value.message;
        case 'error':
          // A server error event comes only this way, as the WebSocketError's
          // error property; anything else is the socket's.
          if (value.error.error?.type === 'error') return value.error.error;
          throw value.error;
        case 'close':
          throw new Error(`the connection closed: ${value.code} ${value.reason}`);
      }
    }
  }

  // finalResponse reads up to the response's end and returns it.
  async finalResponse() {
    for (;;) {
      const ev = await this.next();
      if (ev.type === 'response.completed') return ev.response;
      if (ev.type === 'error' || ev.type === 'response.failed' || ev.type === 'response.incomplete') {
        throw new Error(`response ended with ${JSON.stringify(ev)}`);
      }
    }
  }
}

const outputText = (response) =>
  response.output
    .filter((it) => it.type === 'message')
    .flatMap((it) => it.content)
    .filter((c) => c.type === 'output_text')
    .map((c) => c.text)
    .join('');

async function main() {
  const client = new OpenAI({ baseURL: baseURL(), apiKey: process.env.OPENAI_API_KEY || 'unused', maxRetries: 0 });
  const ws = new ResponsesWS(client);
  const events = new Events(ws);
  try {
    // Cached-state turns: the model calls get_weather, then reads its output.
    // The scripted model makes one call per "call: NAME {json}" line.
    let start = performance.now();
    ws.send({
      type: 'response.create',
      model,
      store: false,
      tools: [weatherTool],
      input: 'What\'s the weather like in Paris?\ncall: get_weather {"location":"Paris"}',
    });
    const first = await events.finalResponse();
    const outputs = [];
    for (const it of first.output) {
      if (it.type !== 'function_call') continue;
      const out = weather(it.arguments);
      console.log(`turn 1 ${first.id}: ${it.name} ${it.arguments} -> ${JSON.stringify(out)} (${ms(start)})`);
      outputs.push({ type: 'function_call_output', call_id: it.call_id, output: out });
    }
    if (outputs.length === 0) throw new Error(`turn 1 called no tool: ${JSON.stringify(first)}`);

    start = performance.now();
    ws.send({ type: 'response.create', model, store: false, tools: [weatherTool], previous_response_id: first.id, input: outputs });
    const second = await events.finalResponse();
    const usage = second.usage;
    console.log(
      `turn 2 ${second.id} (previous ${second.previous_response_id}): ${JSON.stringify(outputText(second))}, ` +
        `${usage.input_tokens} input tokens (${usage.input_tokens_details.cached_tokens} cached) (${ms(start)})`,
    );

    // A suspended rollout continuing the conversation: one response that
    // pauses on each client call until its output is appended.
    start = performance.now();
    ws.send({
      type: 'response.create',
      model,
      store: false,
      suspend: true,
      tools: [weatherTool],
      previous_response_id: second.id,
      input: 'And in Lyon and Oslo?\ncall: get_weather {"location":"Lyon"}\ncall: get_weather {"location":"Oslo"}',
    });
    for (let n = 1; ; n++) {
      const ev = await events.next();
      if (ev.type === 'response.done') {
        const input = ev.response.required_action.submit_tool_outputs.tool_calls.map((c) => {
          const out = weather(c.arguments);
          console.log(`suspended ${ev.response.id} paused at event ${ev.sequence_number}: ${c.name} ${c.arguments} -> ${JSON.stringify(out)} (${ms(start)})`);
          return { type: 'function_call_output', call_id: c.call_id, output: out };
        });
        ws.sendRaw(JSON.stringify({ type: 'response.append', response_id: ev.response.id, input }));
      } else if (ev.type === 'response.completed') {
        const r = ev.response;
        console.log(`suspended ${r.id} ${r.status} after ${n} events in one response: ${JSON.stringify(outputText(r))} (${ms(start)})`);
        break;
      } else if (['error', 'response.failed', 'response.incomplete', 'response.cancelled'].includes(ev.type)) {
        throw new Error(`suspended rollout ended with ${JSON.stringify(ev)}`);
      }
    }
    // Over HTTP: the tokens the first turn's request reads, as its usage counts them.
    const count = await client.responses.inputTokens.count({
      model,
      tools: [weatherTool],
      input: 'What\'s the weather like in Paris?\ncall: get_weather {"location":"Paris"}',
    });
    console.log(`input tokens of the first turn's request: ${count.input_tokens} (${count.object})`);

    // A structured answer: responses.parse with a zod schema as text.format.
    const Weather = z.object({ city: z.string(), temperature_c: z.number().int(), conditions: z.enum(['sunny', 'cloudy', 'rain']) });
    const parsed = await client.responses.parse({
      model,
      input: 'The weather in Paris, as an object.',
      text: { format: zodTextFormat(Weather, 'weather') },
    });
    console.log(`parsed: ${JSON.stringify(parsed.output_parsed)}`);
  } finally {
    ws.close();
  }
}

main().catch((err) => {
  console.error('openai-node:', err.message ?? err);
  process.exit(1);
});
