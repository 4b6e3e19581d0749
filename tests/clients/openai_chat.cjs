// The official OpenAI client, unchanged, against a running `strata serve`: process.argv[2] is its base URL
// (http://127.0.0.1:PORT/v1). A chat answered whole and streamed, the model list, and a refused request; prints
// what it saw as one JSON line for tests/test_server.cpp.
const { OpenAI } = require('openai');

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2], apiKey: 'unused', maxRetries: 0 });
  const request = { model: 'tiny', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 8, temperature: 0 };
  const whole = await client.chat.completions.create(request);
  const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let streamed = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) {
      streamed += chunk.choices[0].delta.content ?? '';
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  const models = await client.models.list();
  let refused = null;
  try {
    await client.chat.completions.create({ ...request, temperature: -1 });
  } catch (error) {
    refused = { status: error.status, param: error.param ?? null };
  }
  console.log(JSON.stringify({
    whole: whole.choices[0].message.content,
    whole_finish: whole.choices[0].finish_reason,
    streamed,
    finish,
    usage,
    models: models.data.map((model) => model.id),
    refused,
  }));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
