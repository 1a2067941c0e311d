// A chat model with a tool, then a structured answer, against tether with
// LangChain's OpenAI integration over the Responses API as its docs show
// it: ChatOpenAI with useResponsesApi, bindTools and a tool loop, then
// withStructuredOutput (a zod schema, method jsonSchema: text.format
// json_schema, strict), which tether's scripted model answers with JSON
// the schema validates.
//
//   TETHER_URL=http://127.0.0.1:8080 node index.mjs
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';

const base = (process.env.TETHER_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '').replace(/\/v1$/, '') + '/v1';
const model = new ChatOpenAI({
  model: 'tether-scripted',
  apiKey: process.env.OPENAI_API_KEY || 'unused',
  configuration: { baseURL: base },
  useResponsesApi: true,
});

const getWeather = tool(async ({ city }) => `Sunny, 21°C in ${city}`, {
  name: 'get_weather',
  description: 'The weather in a city.',
  schema: z.object({ city: z.string() }),
});

async function main() {
  const withTools = model.bindTools([getWeather]);
  const messages = [new HumanMessage('What is the weather in Lyon?\ncall: get_weather {"city":"Lyon"}')];
  let reply = await withTools.invoke(messages);
  const calls = [];
  while (reply.tool_calls?.length) {
    messages.push(reply);
    for (const call of reply.tool_calls) {
      calls.push(call.name);
      messages.push(new ToolMessage({ tool_call_id: call.id, content: await getWeather.invoke(call.args) }));
    }
    reply = await withTools.invoke(messages);
  }
  console.log(`tools: [${calls.join(' ')}] ${JSON.stringify(reply.text)}`);

  const WeatherReport = z.object({
    city: z.string(),
    temperature_c: z.number().int(),
    conditions: z.enum(['sunny', 'cloudy', 'rain']),
  });
  const structured = model.withStructuredOutput(WeatherReport, { name: 'weather_report', method: 'jsonSchema', strict: true });
  console.log(`structured: ${JSON.stringify(await structured.invoke('The weather in Lyon, as an object.'))}`);
  const set = await structured.invoke('Report Rome.\njson: {"city":"Rome","temperature_c":24,"conditions":"sunny"}');
  console.log(`json: ${JSON.stringify(set)}`);
}

main().catch((err) => {
  console.error('langchain:', err.message ?? err);
  process.exit(1);
});
