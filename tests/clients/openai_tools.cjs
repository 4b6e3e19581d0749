// The official OpenAI client, unchanged, asking for a tool (process.argv[2]: the server's base URL): the tool
// calls it reads from a whole answer and from a stream (its deltas accumulated the way the client's docs show),
// printed as one JSON line for tests/test_server.cpp.
const { OpenAI } = require('openai');

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2], apiKey: 'unused', maxRetries: 0 });
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];
  const request = { model: 'tiny', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools };
  const whole = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({ ...request, stream: true });
  const calls = [];
  let content = '';
  let finish = null;
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta ?? {};
    content += delta.content ?? '';
    for (const call of delta.tool_calls ?? []) {
      calls[call.index] ??= { name: '', arguments: '' };
      calls[call.index].name += call.function?.name ?? '';
      calls[call.index].arguments += call.function?.arguments ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  const message = whole.choices[0].message;
  console.log(JSON.stringify({
    whole: {
      content: message.content,
      calls: (message.tool_calls ?? []).map((call) => ({ name: call.function.name, arguments: call.function.arguments })),
      finish: whole.choices[0].finish_reason,
    },
    streamed: { content, calls, finish },
  }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
