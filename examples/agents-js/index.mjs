// An agent with a tool and a structured final output against tether, with
// the OpenAI Agents SDK for JavaScript as its docs show it: over HTTP, then
// over the Responses WebSocket (setOpenAIResponsesTransport). Its outputType
// (a zod schema) asks for text.format json_schema, strict: tether's scripted
// model answers with JSON the schema validates, after calling the tool the
// user's directive names; a json: directive sets the answer itself.
//
//   TETHER_URL=http://127.0.0.1:8080 node index.mjs
import { Agent, run, setDefaultOpenAIClient, setOpenAIResponsesTransport, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { WebSocket } from 'ws';
import { z } from 'zod';

// Node 20 has no global WebSocket; Node 22's would do as well.
globalThis.WebSocket ??= WebSocket;

const base = (process.env.TETHER_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '').replace(/\/v1$/, '') + '/v1';
setDefaultOpenAIClient(new OpenAI({ baseURL: base, apiKey: process.env.OPENAI_API_KEY || 'unused' }));
setTracingDisabled(true); // traces would go to OpenAI

const getWeather = tool({
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `Sunny, 21°C in ${city}`,
});

const WeatherReport = z.object({
  city: z.string(),
  temperature_c: z.number().int(),
  conditions: z.enum(['sunny', 'cloudy', 'rain']),
});

const agent = new Agent({
  name: 'Forecaster',
  instructions: 'Look the weather up, then report it.',
  model: 'tether-scripted',
  tools: [getWeather],
  outputType: WeatherReport,
});

async function main() {
  for (const transport of ['http', 'websocket']) {
    setOpenAIResponsesTransport(transport);
    const looked = await run(agent, 'What is the weather in Paris?\ncall: get_weather {"city":"Paris"}');
    const calls = looked.newItems.filter((i) => i.type === 'tool_call_item').map((i) => i.rawItem.name);
    console.log(`${transport}: [${calls.join(' ')}] ${JSON.stringify(looked.finalOutput)}`);
    const set = await run(agent, 'Report Oslo.\njson: {"city":"Oslo","temperature_c":-3,"conditions":"cloudy"}', {
      previousResponseId: looked.lastResponseId,
    });
    console.log(`${transport} json: ${JSON.stringify(set.finalOutput)}`);
  }
}

main().catch((err) => {
  console.error('agents-js:', err.message ?? err);
  process.exit(1);
});
