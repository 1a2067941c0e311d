// A four-turn chat with a function tool, the shell tool and web search,
// then a structured answer, against tether with the Vercel AI SDK and its
// OpenAI provider, as the AI SDK's docs show them. The provider speaks the
// Responses API and, by default, stores responses and sends earlier
// assistant, shell and web search items back as item_reference items by
// id: tether resolves them from its store.
//
//   TETHER_URL=http://127.0.0.1:8080 node index.mjs
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, Output, stepCountIs, tool } from 'ai';
import { z } from 'zod';

const base = (process.env.TETHER_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '').replace(/\/v1$/, '') + '/v1';
const openai = createOpenAI({ baseURL: base, apiKey: process.env.OPENAI_API_KEY || 'unused' });
const model = openai.responses('tether-scripted');

const tools = {
  get_weather: tool({
    description: 'The weather in a city.',
    inputSchema: z.object({ location: z.string() }),
    execute: async ({ location }) => `Sunny, 21°C in ${location}`,
  }),
  // A pretend sandbox: it says what it would run instead of running it.
  shell: openai.tools.shell({
    execute: async ({ action }) => ({
      output: action.commands.map((c) => ({ stdout: `sandbox: ${c}\n`, stderr: '', outcome: { type: 'exit', exitCode: 0 } })),
    }),
  }),
  web_search: openai.tools.webSearch(),
};

async function main() {
  const messages = [];
  const turns = [
    'What\'s the weather like in Paris?\ncall: get_weather {"location":"Paris"}',
    'List the files.\ncall: shell {"commands":["ls"]}',
    'How do I read a file in Go?\ncall: web_search {"query":"read a file in Go"}',
    'Thanks. Summarise.',
  ];
  for (const [i, text] of turns.entries()) {
    messages.push({ role: 'user', content: text });
    const result = await generateText({ model, messages, tools, stopWhen: stepCountIs(4) });
    messages.push(...result.response.messages);
    const calls = result.steps.flatMap((s) => s.toolCalls).map((c) => c.toolName);
    console.log(`turn ${i + 1}: [${calls.join(' ')}] ${JSON.stringify(result.text)}`);
  }

  const { output } = await generateText({
    model,
    output: Output.object({
      schema: z.object({ city: z.string(), temperature_c: z.number().int(), conditions: z.enum(['sunny', 'cloudy', 'rain']) }),
    }),
    prompt: 'The weather in Paris, as an object.',
  });
  console.log(`structured: ${JSON.stringify(output)}`);
}

main().catch((err) => {
  console.error('ai-sdk:', err.message ?? err, err.responseBody ?? '');
  process.exit(1);
});
