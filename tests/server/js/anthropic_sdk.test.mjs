// strata serve driven by the official Anthropic SDK, serving the built-in strata-demo with the
// prompts of its transformers goldens (tests/fixtures/demo/strata-demo.json): messages whole and
// streamed (the MessageStream helper and raw events), a tool round trip whose prompts count the
// goldens' tokens and whose answer is transformers' greedy text, thinking on, off and with a
// budget, stop sequences, count_tokens, x-api-key auth and model names mapped by --any-model, and
// errors surfacing as the SDK's typed errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { startServer } from './strata_server.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const goldens = JSON.parse(fs.readFileSync(path.join(here, '../../fixtures/demo/strata-demo.json'), 'utf8'));
const byName = Object.fromEntries(goldens.cases.map((c) => [c.name, c]));

const model = 'strata-demo';
let server;  // plain: model names are checked
let locked;  // --api-key and --any-model, as an agent would be served
let client;
before(async () => {
  server = await startServer([], { model: null });
  locked = await startServer(['--api-key', 'sk-ant-test', '--any-model'], { model: null });
  client = new Anthropic({ baseURL: `http://127.0.0.1:${server.port}`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const results = await Promise.all([server.stop(), locked.stop()]);
  for (const { code } of results) assert.equal(code, 0, 'strata serve exits cleanly on SIGTERM');
});

// A golden's tools in Anthropic's form.
function tools(c) {
  return c.tools.map((t) => ({
    name: t.function.name,
    description: t.function.description,
    input_schema: t.function.parameters,
  }));
}

// The golden reply (transformers' greedy text) split into its thinking and its answer.
function golden(c) {
  const text = c.reply.replace(/<\|im_end\|>[\s\S]*$/, '');
  const [thinking, answer] = text.split('\n</think>\n\n');
  return { thinking, answer };
}

// Prompt tokens, whether the prefix cache served them (cache reads) or they ran.
function prompt(usage) {
  return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
}

function params(c, extra = {}) {
  const system = c.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
  const messages = c.messages.filter((m) => m.role !== 'system');
  return { model, max_tokens: 300, temperature: 0, messages, ...(system ? { system } : {}), ...extra };
}

test('messages.create answers with thinking and text blocks, the goldens greedy text', async () => {
  const c = byName.system_identity;
  const m = await client.messages.create(params(c));
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, model);
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
  const { thinking, answer } = golden(c);
  assert.equal(m.content[0].thinking, thinking);
  assert.equal(typeof m.content[0].signature, 'string');
  assert.ok(m.content[0].signature.length > 0);
  assert.equal(m.content[1].text, answer);
  assert.equal(m.stop_reason, 'end_turn');
  assert.equal(m.stop_sequence, null);
  assert.equal(prompt(m.usage), c.prompt_ids.length);
  assert.ok(m.usage.output_tokens > 0);
  assert.equal(m.usage.cache_creation_input_tokens, 0);
});

test('client.messages.stream gives text events and a finalMessage equal to the whole message', async () => {
  const c = byName.system_identity;
  const whole = await client.messages.create(params(c));
  const stream = client.messages.stream(params(c));
  let text = '';
  let thinking = '';
  stream.on('text', (delta) => { text += delta; });
  stream.on('thinking', (delta) => { thinking += delta; });
  const final = await stream.finalMessage();
  assert.equal(text, golden(c).answer);
  assert.equal(thinking, golden(c).thinking);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(prompt(final.usage), prompt(whole.usage));
  assert.match(final.id, /^msg_/);
});

test('stream: true gives the raw events in Anthropic\'s order', async () => {
  const stream = await client.messages.create({ ...params(byName.arithmetic), stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'message_start');
  assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
  assert.deepEqual(events[0].message.content, []);
  // Blocks one after another: start, deltas, stop; the thinking block signed before it stops.
  let open = null;
  const blocks = [];
  for (const e of events.slice(1, -2)) {
    if (e.type === 'content_block_start') {
      assert.equal(open, null);
      open = e.index;
      assert.equal(e.index, blocks.length);
      blocks.push({ type: e.content_block.type, deltas: [] });
    } else if (e.type === 'content_block_delta') {
      assert.equal(e.index, open);
      blocks[open].deltas.push(e.delta.type);
    } else if (e.type === 'content_block_stop') {
      assert.equal(e.index, open);
      open = null;
    }
  }
  assert.equal(open, null);
  assert.deepEqual(blocks.map((b) => b.type), ['thinking', 'text']);
  assert.equal(blocks[0].deltas.at(-1), 'signature_delta');
  assert.ok(blocks[0].deltas.slice(0, -1).every((t) => t === 'thinking_delta'));
  assert.ok(blocks[1].deltas.every((t) => t === 'text_delta'));
  const delta = events.at(-2);
  assert.equal(delta.delta.stop_reason, 'end_turn');
  assert.ok(delta.usage.output_tokens > 0);

  // The SDK drops ping events; on the wire, one follows message_start.
  const res = await fetch(`http://127.0.0.1:${server.port}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ ...params(byName.arithmetic), stream: true }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const frames = (await res.text()).split('\n\n').filter(Boolean);
  const names = frames.map((f) => f.match(/^event: (\w+)\ndata: /)?.[1]);
  assert.deepEqual(names.slice(0, 3), ['message_start', 'ping', 'content_block_start']);
  // The same sequence as the SDK's (how many deltas depends on timing: runs of them merged).
  const runs = (list) => list.filter((t, i) => t !== 'content_block_delta' || list[i - 1] !== t);
  assert.deepEqual(runs(names), runs(types.slice(0, 1).concat(['ping'], types.slice(1))));
});

test('tools round trip: a tool_use block, then its tool_result answered as transformers answers', async () => {
  const call = byName.tool_call_weather;
  const first = await client.messages.create(params(call, { tools: tools(call) }));
  assert.equal(first.stop_reason, 'tool_use');
  const use = first.content.find((b) => b.type === 'tool_use');
  assert.ok(use, JSON.stringify(first.content));
  assert.match(use.id, /^toolu_/);
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { city: 'Paris' });
  assert.equal(prompt(first.usage), call.prompt_ids.length);

  // Streamed, the call arrives as input_json_delta and the helper parses it.
  const streamed = await client.messages.stream(params(call, { tools: tools(call) })).finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  assert.deepEqual(streamed.content.find((b) => b.type === 'tool_use').input, { city: 'Paris' });

  const answer = byName.tool_response_weather;
  const result = answer.messages.find((m) => m.role === 'tool').content;
  const next = params(answer, {
    tools: tools(answer),
    messages: [
      { role: 'user', content: answer.messages[0].content },
      { role: 'assistant', content: [use] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: result }] },
    ],
  });
  const counted = await client.messages.countTokens({ model, tools: next.tools, messages: next.messages });
  assert.equal(counted.input_tokens, answer.prompt_ids.length, 'the prompt is the golden prompt');
  const reply = await client.messages.create(next);
  assert.equal(reply.stop_reason, 'end_turn');
  assert.equal(reply.content.find((b) => b.type === 'text').text, golden(answer).answer);
  assert.equal(prompt(reply.usage), answer.prompt_ids.length);

  // tool_choice any and disable_parallel_tool_use are accepted; none hides the tools.
  const forced = await client.messages.create(
    params(call, { tools: tools(call), tool_choice: { type: 'any', disable_parallel_tool_use: true } }));
  assert.equal(forced.stop_reason, 'tool_use');
  assert.equal(forced.content.filter((b) => b.type === 'tool_use').length, 1);
  const none = await client.messages.countTokens({ model, tools: tools(call), tool_choice: { type: 'none' },
                                                   messages: call.messages });
  assert.ok(none.input_tokens < call.prompt_ids.length);
});

test('thinking: disabled answers in text only; a budget closes the thinking', async () => {
  const c = byName.no_thinking_quote;
  const off = await client.messages.create(params(c, { thinking: { type: 'disabled' } }));
  assert.deepEqual(off.content.map((b) => b.type), ['text']);
  assert.equal(off.content[0].text, c.reply.replace(/<\|im_end\|>[\s\S]*$/, ''));
  assert.equal(prompt(off.usage), c.prompt_ids.length);

  const budget = { type: 'enabled', budget_tokens: 5 };
  const on = await client.messages.create(params(byName.arithmetic, { thinking: budget }));
  assert.deepEqual(on.content.map((b) => b.type), ['thinking', 'text']);
  assert.ok(on.content[1].text.startsWith('**Final Answer:**'), on.content[1].text);
  assert.ok(golden(byName.arithmetic).thinking.startsWith(on.content[0].thinking));
  assert.equal(on.strata.thinking.budget_closed, true);
  const streamed = await client.messages.stream(params(byName.arithmetic, { thinking: budget })).finalMessage();
  assert.deepEqual(streamed.content, on.content);
});

test('stop_sequences end the text and are named', async () => {
  const c = byName.system_identity;
  for (const stream of [false, true]) {
    const p = params(c, { stop_sequences: ['How'] });
    const m = stream ? await client.messages.stream(p).finalMessage() : await client.messages.create(p);
    assert.equal(m.stop_reason, 'stop_sequence');
    assert.equal(m.stop_sequence, 'How');
    assert.equal(m.content.at(-1).text, golden(c).answer.split('How')[0]);
  }
  const short = await client.messages.create(params(c, { max_tokens: 3 }));
  assert.equal(short.stop_reason, 'max_tokens');
  assert.equal(short.usage.output_tokens, 3);
});

test('count_tokens counts the prompt a message would have', async () => {
  const c = byName.system_identity;
  const { system, messages } = params(c);
  const counted = await client.messages.countTokens({ model, system, messages });
  assert.equal(counted.input_tokens, c.prompt_ids.length);
});

test('errors surface as the SDK\'s typed errors', async () => {
  await assert.rejects(
    client.messages.create(params(byName.arithmetic, { model: 'claude-sonnet-5' })),
    (e) => e instanceof Anthropic.NotFoundError && e.status === 404 && e.error?.error?.type === 'not_found_error',
  );
  await assert.rejects(
    client.messages.create(params(byName.arithmetic, { temperature: 3 })),
    (e) => e instanceof Anthropic.BadRequestError && /temperature/.test(e.message),
  );
  await assert.rejects(
    client.messages.create({ model, messages: [{ role: 'user', content: 'Hi' }] }),  // no max_tokens
    (e) => e instanceof Anthropic.BadRequestError && e.error?.type === 'error',
  );
  await assert.rejects(
    client.messages.countTokens({ model, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }),
    (e) => e instanceof Anthropic.BadRequestError && /text-only/.test(e.message),
  );
  const wrongKey = new Anthropic({ baseURL: `http://127.0.0.1:${locked.port}`, apiKey: 'sk-ant-wrong', maxRetries: 0 });
  await assert.rejects(
    wrongKey.messages.create(params(byName.arithmetic)),
    (e) => e instanceof Anthropic.AuthenticationError && e.status === 401,
  );
});

test('an agent\'s own model name and x-api-key are served with --any-model and --api-key', async () => {
  const agent = new Anthropic({ baseURL: `http://127.0.0.1:${locked.port}`, apiKey: 'sk-ant-test', maxRetries: 0 });
  const c = byName.system_identity;
  const m = await agent.messages.create(params(c, { model: 'claude-sonnet-5' }));
  assert.equal(m.model, model);  // the model that answered
  assert.equal(m.content.at(-1).text, golden(c).answer);
  const streamed = await agent.messages.stream(params(c, { model: 'claude-haiku-5-5' })).finalMessage();
  assert.deepEqual(streamed.content, m.content);
  // An auth token (Authorization: Bearer) works as well.
  const bearer = new Anthropic({ baseURL: `http://127.0.0.1:${locked.port}`, apiKey: null, authToken: 'sk-ant-test', maxRetries: 0 });
  const counted = await bearer.messages.countTokens({ model: 'claude-opus-5', system: params(c).system, messages: params(c).messages });
  assert.equal(counted.input_tokens, c.prompt_ids.length);
});
