// Three turns of an agent whose memory is an OpenAIConversationsSession:
// the Agents SDK keeps the conversation in tether's Conversations API
// (/v1/conversations), reads it back before each turn and adds each turn's
// items after it, as its docs show. It prints each turn's tool calls and
// answer, how many items the session holds after it, and the
// conversation's id and the last response's, which the test reads back.
//
//   TETHER_URL=http://127.0.0.1:8080 node conversations.mjs
import { Agent, OpenAIConversationsSession, run, setDefaultOpenAIClient, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';

const base = (process.env.TETHER_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '').replace(/\/v1$/, '') + '/v1';
setDefaultOpenAIClient(new OpenAI({ baseURL: base, apiKey: process.env.OPENAI_API_KEY || 'unused' }));
setTracingDisabled(true); // traces would go to OpenAI

const getWeather = tool({
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `Sunny, 21°C in ${city}`,
});

const agent = new Agent({
  name: 'Forecaster',
  instructions: 'Look the weather up when asked, then answer.',
  model: 'tether-scripted',
  tools: [getWeather],
});

async function main() {
  const session = new OpenAIConversationsSession();
  const turns = [
    'What is the weather in Paris?\ncall: get_weather {"city":"Paris"}',
    'And in Oslo?\ncall: get_weather {"city":"Oslo"}',
    'Thanks, that is all.',
  ];
  let last;
  for (const [i, input] of turns.entries()) {
    last = await run(agent, input, { session });
    const calls = last.newItems.filter((it) => it.type === 'tool_call_item').map((it) => it.rawItem.name);
    const items = await session.getItems();
    console.log(`turn ${i + 1}: [${calls.join(' ')}] items=${items.length} ${JSON.stringify(last.finalOutput)}`);
  }
  console.log(`conversation ${await session.getSessionId()} last ${last.lastResponseId}`);
}

main().catch((err) => {
  console.error('agents-js conversations:', err.message ?? err);
  process.exit(1);
});
