// strata serve with no --model serves the built-in strata-demo; driven by the OpenAI SDK with the
// prompts of its transformers goldens (tests/fixtures/demo/strata-demo.json): thinking answers come
// back split into reasoning_content and content, tool requests as parsed tool calls, and the
// greedy text is transformers' text.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startServer } from './strata_server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const goldens = JSON.parse(fs.readFileSync(path.join(here, '../../fixtures/demo/strata-demo.json'), 'utf8'));
const byName = Object.fromEntries(goldens.cases.map((c) => [c.name, c]));

let server;
let client;
before(async () => {
  server = await startServer([], { model: null });
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.stop();
});

function request(c, extra = {}) {
  const body = { model: 'strata-demo', messages: c.messages, temperature: 0, max_tokens: 200, ...extra };
  if (c.tools) body.tools = c.tools;
  if (Object.keys(c.kwargs ?? {}).length) body.chat_template_kwargs = c.kwargs;
  return body;
}

// The golden reply (transformers' greedy text) with the tags a client never sees removed.
function visible(text) {
  return text.replace(/<\|im_end\|>[\s\S]*$/, '');
}

test('the default model is strata-demo', async () => {
  const page = await client.models.list();
  assert.deepEqual(page.data.map((m) => m.id), ['strata-demo']);
});

test('a thinking answer lands in reasoning_content and content', async () => {
  for (const name of ['system_identity', 'arithmetic']) {
    const c = byName[name];
    const reply = await client.chat.completions.create(request(c));
    const msg = reply.choices[0].message;
    assert.ok(msg.reasoning_content && msg.reasoning_content.length > 0, `${name}: reasoning_content`);
    assert.ok(msg.content && msg.content.length > 0, `${name}: content`);
    assert.ok(!msg.content.includes('<think>') && !msg.content.includes('</think>'), `${name}: no tags in content`);
    const golden = visible(c.reply);
    assert.ok(golden.includes(msg.reasoning_content.trim()), `${name}: reasoning is transformers' text`);
    assert.ok(golden.endsWith(msg.content.trim()) || golden.includes(msg.content.trim()), `${name}: content is transformers' text`);
    assert.equal(reply.choices[0].finish_reason, 'stop');
    assert.ok(reply.usage.completion_tokens_details.reasoning_tokens > 0);
  }
});

test('thinking off answers in content only', async () => {
  const c = byName.no_thinking_quote;
  const reply = await client.chat.completions.create(request(c));
  const msg = reply.choices[0].message;
  assert.ok(!msg.reasoning_content);
  assert.ok(visible(c.reply).startsWith(msg.content.trim().slice(0, 40)));
});

test('a tools request returns a parsed tool call', async () => {
  const c = byName.tool_call_weather;
  const reply = await client.chat.completions.create(request(c));
  assert.equal(reply.choices[0].finish_reason, 'tool_calls');
  const calls = reply.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.equal(calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(calls[0].function.arguments), { city: 'Paris' });
  assert.match(calls[0].id, /^call_/);
});

test('streaming gives the same split as the whole response', async () => {
  const c = byName.system_identity;
  const whole = (await client.chat.completions.create(request(c))).choices[0].message;
  const stream = await client.chat.completions.create({ ...request(c), stream: true });
  let reasoning = '';
  let content = '';
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta ?? {};
    reasoning += d.reasoning_content ?? '';
    content += d.content ?? '';
  }
  assert.equal(reasoning, whole.reasoning_content);
  assert.equal(content, whole.content);
});

test('think control: a thinking budget closes the thinking and the answer follows the hint', async () => {
  const c = byName.arithmetic;
  const reply = await client.chat.completions.create(request(c, { max_thinking_tokens: 5 }));
  const msg = reply.choices[0].message;
  assert.ok(msg.reasoning_content && msg.reasoning_content.length > 0);
  assert.ok(msg.content.startsWith('**Final Answer:**'), msg.content);
  assert.equal(reply.strata.thinking.budget_closed, true);
  assert.equal(reply.strata.thinking.reasoning_tokens, 6);  // 5 thinking tokens and the injected </think>
  assert.equal(reply.usage.completion_tokens_details.reasoning_tokens, 6);
  const metrics = await (await fetch(server.url('/metrics'))).text();
  assert.match(metrics, /^strata_think_budget_closes_total [1-9]\d*$/m);
});
