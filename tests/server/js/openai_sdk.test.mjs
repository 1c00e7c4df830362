// strata serve driven by the official OpenAI SDK with the stories260K model: chat (whole and
// streamed), completions checked against llama2.c's greedy output, stop sequences, seeds, a tool
// round trip, usage, models, and the SDK's error classes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';
import { startServer, modelId, expectedGreedyPath } from './strata_server.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'strata serve exits cleanly on SIGTERM');
});

const messages = [{ role: 'user', content: 'Once upon a time' }];

async function streamChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  const content = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  const finish = chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean);
  return { chunks, content, finish };
}

test('models lists the served model', async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), [modelId]);
  const one = await client.models.retrieve(modelId);
  assert.equal(one.id, modelId);
});

test('completions reproduce llama2.c greedy output from BOS', async () => {
  const expected = fs.readFileSync(expectedGreedyPath, 'utf8');
  const r = await client.completions.create({ model: modelId, prompt: '', max_tokens: 256, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].text + '\n', expected);  // run.c ends with a newline
  assert.equal(r.usage.prompt_tokens, 1);
  assert.equal(r.usage.completion_tokens, 256);
});

test('non-streaming chat returns a message and usage', async () => {
  const r = await client.chat.completions.create({ model: modelId, messages, max_tokens: 20, seed: 1 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  const choice = r.choices[0];
  assert.equal(choice.message.role, 'assistant');
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(choice.message.content.length > 0);
  assert.ok(['stop', 'length'].includes(choice.finish_reason));
  const u = r.usage;
  assert.ok(u.prompt_tokens > 0);
  assert.ok(u.completion_tokens > 0 && u.completion_tokens <= 20);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.equal(u.prompt_tokens_details.cached_tokens, 0);
  assert.equal(u.completion_tokens_details.reasoning_tokens, 0);
});

test('streaming chat: role first, same text as non-streaming, finish, usage, done', async () => {
  const params = { model: modelId, messages, max_tokens: 30, seed: 7, temperature: 0.8 };
  const whole = await client.chat.completions.create(params);
  const s = await streamChat({ ...params, stream_options: { include_usage: true } });
  assert.equal(s.chunks[0].choices[0].delta.role, 'assistant');
  assert.equal(s.content, whole.choices[0].message.content);
  assert.deepEqual(s.finish, [whole.choices[0].finish_reason]);
  const last = s.chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, whole.usage);
  for (const c of s.chunks) assert.equal(c.id, s.chunks[0].id);
});

test('stop sequences end the text before the stop, streaming or not', async () => {
  const params = { model: modelId, messages, max_tokens: 60, temperature: 0 };
  const full = (await client.chat.completions.create(params)).choices[0].message.content;
  const words = full.split(' ').filter((w) => /^[a-z]{3,}$/.test(w));
  assert.ok(words.length > 2, `too few words in: ${full}`);
  const stop = ' ' + words[Math.floor(words.length / 2)];
  const expected = full.slice(0, full.indexOf(stop));
  const r = await client.chat.completions.create({ ...params, stop: [stop, 'zzzz'] });
  assert.equal(r.choices[0].message.content, expected);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.completion_tokens < 60);
  const s = await streamChat({ ...params, stop });
  assert.equal(s.content, expected);
  assert.deepEqual(s.finish, ['stop']);
});

test('logprobs: an entry per completion token, with its alternatives', async () => {
  const r = await client.chat.completions.create({
    model: modelId,
    messages,
    max_tokens: 12,
    temperature: 0,
    logprobs: true,
    top_logprobs: 3,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) {
    assert.ok(e.logprob <= 0);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);  // greedy: the sampled token is the likeliest
  }
  const c = await client.completions.create({ model: modelId, prompt: 'Once upon a time', max_tokens: 8, temperature: 0, logprobs: 2 });
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, c.usage.completion_tokens);
  assert.equal(lp.text_offset[0], 0);
});

test('the same seed gives the same text; another seed another', async () => {
  const params = { model: modelId, messages, max_tokens: 40, temperature: 1.0 };
  const a = await client.chat.completions.create({ ...params, seed: 42 });
  const b = await client.chat.completions.create({ ...params, seed: 42 });
  const c = await client.chat.completions.create({ ...params, seed: 43 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.notEqual(a.choices[0].message.content, c.choices[0].message.content);
});

test('tools round trip: tools offered, then an assistant tool call and its result sent back', async () => {
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Current weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    },
  ];
  const first = await client.chat.completions.create({
    model: modelId,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools,
    tool_choice: 'auto',
    max_tokens: 16,
  });
  assert.ok(['stop', 'length', 'tool_calls'].includes(first.choices[0].finish_reason));
  const second = await client.chat.completions.create({
    model: modelId,
    messages: [
      { role: 'user', content: 'What is the weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 21 C' },
    ],
    tools,
    max_tokens: 16,
  });
  assert.equal(second.choices[0].message.role, 'assistant');
  assert.ok(second.usage.prompt_tokens > first.usage.prompt_tokens);
  const none = await client.chat.completions.create({
    model: modelId,
    messages: [{ role: 'user', content: 'Hi' }],
    tools,
    tool_choice: 'none',
    max_tokens: 4,
  });
  assert.ok(none.usage.prompt_tokens < first.usage.prompt_tokens, 'tool_choice none leaves the tools out');
});

test('n choices come back indexed, whole and streamed', async () => {
  const whole = await client.chat.completions.create({ model: modelId, messages, n: 2, max_tokens: 6, seed: 3 });
  assert.deepEqual(whole.choices.map((c) => c.index), [0, 1]);
  const stream = await client.chat.completions.create({
    model: modelId, messages, n: 2, max_tokens: 6, seed: 3, stream: true,
  });
  const text = ['', ''];
  for await (const chunk of stream) for (const c of chunk.choices) text[c.index] += c.delta.content ?? '';
  assert.deepEqual(text, whole.choices.map((c) => c.message.content));
});

test('errors arrive as the SDK error classes', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, 'model_not_found');
    assert.equal(e.param, 'model');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model: modelId, messages, n: 0 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.param, 'n');
    return true;
  });
  await assert.rejects(
    client.chat.completions.create({
      model: modelId,
      messages,
      response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'array', uniqueItems: true } } },
    }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'response_format' && /uniqueItems/.test(e.message),
  );
});

test('json_schema response_format: the answer parses and fits the schema', async () => {
  const schema = {
    type: 'object',
    properties: { answer: { enum: ['yes', 'no'] }, count: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['answer', 'count'],
    additionalProperties: false,
  };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: modelId,
      messages,
      max_tokens: 64,
      seed,
      response_format: { type: 'json_schema', json_schema: { name: 'verdict', strict: true, schema } },
    });
    const value = JSON.parse(r.choices[0].message.content);
    assert.ok(['yes', 'no'].includes(value.answer), r.choices[0].message.content);
    assert.ok(Number.isInteger(value.count) && value.count >= 0 && value.count <= 9);
    assert.deepEqual(Object.keys(value), ['answer', 'count']);
  }
});
