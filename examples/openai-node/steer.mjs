// response.steer with openai-node's Responses WebSocket client (ResponsesWS
// sends it as one of its typed client events): user input into a response
// while it runs.
//
//  1. into a response writing its answer: response.steer.accepted; the
//     response ends at its step's end, response.incomplete with reason
//     "steered", and a successor response begins on its own (its
//     response.created continues the steered one: previous_response_id)
//     and answers the steering, as OpenAI's WebSocket mode does;
//  2. into a response that completes on a tool call: accepted, then after
//     response.completed a response.steer.pending whose required_input
//     stubs the client fills with its saved output, sending one
//     response.create that continues the response; the steering joins that
//     request's input after the output;
//  3. into a suspended rollout parked on its call (tether's extension, one
//     response by design: no successor): accepted and pending at once; the
//     steering joins the context with the outputs that resume it.
//
//   go run ./cmd/tether serve --addr 127.0.0.1:8080 --ttft 1s
//   cd examples/openai-node && npm ci && node steer.mjs
import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';

const model = 'tether-scripted';
const base = (process.env.TETHER_URL || 'http://127.0.0.1:8080/v1').replace(/\/+$/, '');

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Get the current weather for a location.',
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
  strict: false,
};
const weather = (args) => `Sunny, 21°C in ${JSON.parse(args).location}`;

// next reads the next server event of one ResponsesWS stream.
async function next(it) {
  for (;;) {
    const { value, done } = await it.next();
    if (done) throw new Error('the connection closed');
    if (value.type === 'message') return value.message;
    if (value.type === 'error') throw new Error(JSON.stringify(value.error.error ?? value.error.message));
    if (value.type === 'close') throw new Error(`the connection closed: ${value.code}`);
  }
}

// until reads events until one of type, and returns it.
async function until(it, type) {
  for (;;) {
    const ev = await next(it);
    if (ev.type === type) return ev;
    if (['error', 'response.failed', 'response.incomplete', 'response.steer.failed'].includes(ev.type)) {
      throw new Error(`wanted ${type}, got ${JSON.stringify(ev)}`);
    }
  }
}

const stubs = (pending) => pending.required_input.map((s) => `${s.type} ${s.call_id} ${s.name}`).join(', ');
const texts = (response) =>
  response.output.filter((it) => it.type === 'message').map((it) => JSON.stringify(it.content[0].text));

async function main() {
  const client = new OpenAI({ baseURL: base, apiKey: process.env.OPENAI_API_KEY || 'unused', maxRetries: 0 });
  const ws = new ResponsesWS(client);
  const it = ws.stream();
  try {
    // 1. Into a response writing its answer.
    ws.send({ type: 'response.create', model, input: 'Write a summary.' });
    let created = await until(it, 'response.created');
    ws.send({ type: 'response.steer', previous_response_id: created.response.id, input: 'Focus on the parser.' });
    const accepted = await until(it, 'response.steer.accepted');
    const steered = await until(it, 'response.incomplete');
    const successor = await until(it, 'response.created');
    let done = await until(it, 'response.completed');
    const continues = successor.response.previous_response_id === created.response.id;
    console.log(`running ${created.response.id}: accepted ${accepted.steer.id}, incomplete (${steered.response.incomplete_details.reason}) with ${texts(steered.response).join(' ')}; successor ${done.response.id} continues it: ${continues}, answers ${texts(done.response).join(' ')}`);

    // 2. Into a response that completes on a call.
    ws.send({
      type: 'response.create', model, tools: [weatherTool],
      input: 'Weather in Paris?\ncall: get_weather {"location":"Paris"}',
    });
    created = await until(it, 'response.created');
    ws.send({ type: 'response.steer', previous_response_id: created.response.id, input: [{ type: 'message', role: 'user', content: 'Metric units.' }] });
    await until(it, 'response.steer.accepted');
    done = await until(it, 'response.completed');
    const pending = await until(it, 'response.steer.pending');
    console.log(`on a call ${done.response.id}: accepted, completed, pending ${pending.reason} [${stubs(pending)}]`);
    const call = done.response.output.find((o) => o.type === 'function_call');
    const filled = pending.required_input.map((s) => ({ type: s.type, call_id: s.call_id, output: weather(call.arguments) }));
    ws.send({ type: 'response.create', model, tools: [weatherTool], store: true, previous_response_id: done.response.id, input: filled });
    const cont = await until(it, 'response.completed');
    const input = await client.responses.inputItems.list(cont.response.id, { order: 'asc' });
    // The steering is the newest user message of the context: the model acts on it.
    console.log(`continued ${cont.response.id}: [${cont.response.output.map((o) => o.type).join(' ')}], input [${input.data.map((i) => i.type).join(' ')}]`);

    // 3. Into a suspended rollout parked on its call.
    ws.send({
      type: 'response.create', model, suspend: true, store: true, tools: [weatherTool],
      input: 'Weather in Oslo?\ncall: get_weather {"location":"Oslo"}',
    });
    let pause = await until(it, 'response.done');
    const id = pause.response.id;
    ws.send({ type: 'response.steer', previous_response_id: id, input: 'Then Bergen.' });
    await until(it, 'response.steer.accepted');
    const parked = await until(it, 'response.steer.pending');
    for (;;) {
      const input = pause.response.required_action.submit_tool_outputs.tool_calls.map((c) => ({
        type: 'function_call_output', call_id: c.call_id, output: weather(c.arguments),
      }));
      ws.sendRaw(JSON.stringify({ type: 'response.append', response_id: id, input }));
      const ev = await next(it);
      let end = ev;
      while (!['response.done', 'response.completed'].includes(end.type)) end = await next(it);
      if (end.type === 'response.completed') {
        const items = await client.responses.inputItems.list(id, { order: 'asc' });
        const steered = items.data.some((i) => i.type === 'message' && i.content?.[0]?.text === 'Then Bergen.');
        console.log(`parked ${id}: accepted and pending [${stubs(parked)}]; completed with the steering in its context: ${steered}`);
        break;
      }
      pause = end;
    }
  } finally {
    ws.close();
  }
}

main().catch((err) => {
  console.error('steer:', err.message ?? err);
  process.exit(1);
});
