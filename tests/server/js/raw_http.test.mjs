// Every error path over plain HTTP: each answer has the right status and OpenAI's error shape
// {"error": {"message", "type", "param", "code"}}, and the server keeps serving afterwards.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startServer, post, getJson, modelId, modelPath } from './strata_server.mjs';

const KEY = 'sk-strata-test';
let open;    // no API key, context 64 tokens, bodies up to 4096 bytes
let locked;  // --api-key
before(async () => {
  [open, locked] = await Promise.all([
    startServer(['--ctx-size', '64', '--max-body-bytes', '4096', '--alias', 'tiny']),
    startServer(['--api-key', KEY]),
  ]);
});
after(async () => {
  await Promise.all([open.stop(), locked.stop()]);
});

const chat = (extra = {}) => ({ model: modelId, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, ...extra });

function assertError(r, status, { code, param } = {}) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json && r.json.error, `no error object: ${r.text}`);
  const e = r.json.error;
  assert.deepEqual(Object.keys(e), ['message', 'type', 'param', 'code']);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  if (code !== undefined) assert.equal(e.code, code);
  if (param !== undefined) assert.equal(e.param, param);
}

test('malformed JSON and non-object bodies are 400', async () => {
  assertError(await post(open, '/v1/chat/completions', '{"messages": [}'), 400, { code: 'invalid_json' });
  assertError(await post(open, '/v1/chat/completions', '[1, 2]'), 400, { code: 'invalid_json' });
  assertError(await post(open, '/v1/completions', ''), 400, { code: 'invalid_json' });
});

test('wrong types and values are 400 naming the field', async () => {
  assertError(await post(open, '/v1/chat/completions', chat({ temperature: 'warm' })), 400, {
    code: 'invalid_type',
    param: 'temperature',
  });
  assertError(await post(open, '/v1/chat/completions', chat({ max_tokens: -5 })), 400, { param: 'max_tokens' });
  assertError(await post(open, '/v1/chat/completions', chat({ messages: 'Hi' })), 400, { param: 'messages' });
  assertError(await post(open, '/v1/chat/completions', chat({ messages: [{ role: 'user', content: 3 }] })), 400, {
    param: 'messages[0].content',
  });
  assertError(await post(open, '/v1/chat/completions', chat({ stop: [1] })), 400, { param: 'stop[0]' });
  assertError(await post(open, '/v1/chat/completions', chat({ n: 0 })), 400, { param: 'n' });
  assertError(await post(open, '/v1/chat/completions', chat({ top_logprobs: 2 })), 400, { param: 'top_logprobs' });
  assertError(await post(open, '/v1/chat/completions', chat({ max_thinking_tokens: 'x' })), 400, {
    code: 'invalid_type',
    param: 'max_thinking_tokens',
  });
  assertError(await post(open, '/v1/chat/completions', chat({ response_format: { type: 'json_schema' } })), 400, {
    param: 'response_format.schema',
  });
  assertError(await post(open, '/v1/chat/completions', chat({ tools: [{ type: 'function', function: {} }] })), 400, {
    param: 'tools[0].function.name',
  });
  assertError(await post(open, '/v1/completions', { prompt: 7 }), 400, { param: 'prompt' });
});

test('unknown fields are ignored', async () => {
  const r = await post(open, '/v1/chat/completions', chat({ store: true, metadata: { a: 'b' }, whatever: [1] }));
  assert.equal(r.status, 200, r.text);
});

test('an unknown model is 404; the alias works', async () => {
  assertError(await post(open, '/v1/chat/completions', chat({ model: 'gpt-4o' })), 404, {
    code: 'model_not_found',
    param: 'model',
  });
  assertError(await post(open, '/v1/completions', { model: 'nope', prompt: 'x' }), 404, { code: 'model_not_found' });
  assert.equal((await post(open, '/v1/chat/completions', chat({ model: 'tiny' }))).status, 200);
});

test('an oversize body is 413', async () => {
  const big = chat({ messages: [{ role: 'user', content: 'x'.repeat(8000) }] });
  assertError(await post(open, '/v1/chat/completions', big), 413, { code: 'request_too_large' });
  assert.equal((await post(open, '/v1/chat/completions', chat())).status, 200);
});

test('a prompt beyond the context is 400', async () => {
  const long = chat({ messages: [{ role: 'user', content: 'Once upon a time there was a dog. '.repeat(10) }] });
  assertError(await post(open, '/v1/chat/completions', long), 400, { code: 'context_length_exceeded' });
  assertError(await post(open, '/v1/chat/completions', chat({ max_tokens: 500 })), 400, {
    code: 'context_length_exceeded',
    param: 'max_tokens',
  });
  assertError(await post(open, '/v1/completions', { prompt: 'a b c d e f g h '.repeat(10) }), 400, {
    code: 'context_length_exceeded',
  });
});

test('unknown paths and methods get JSON errors', async () => {
  const r = await fetch(open.url('/v2/engines'));
  assert.equal(r.status, 404);
  assert.equal((await r.json()).error.code, 'not_found');
  const m = await fetch(open.url('/v1/chat/completions'), { method: 'GET' });
  assert.equal(m.status, 405);
});

test('a request that is not HTTP is refused and the server survives', async () => {
  const reply = await new Promise((resolve) => {
    const s = net.connect(open.port, '127.0.0.1', () => s.end('NONSENSE\r\n\r\n'));
    let data = '';
    s.on('data', (d) => (data += d));
    s.on('close', () => resolve(data));
  });
  assert.ok(reply === '' || /^HTTP\/1\.1 400/.test(reply), reply);  // closed, or a 400
  assert.equal((await getJson(open, '/health')).json.status, 'ok');
});

test('the API key is required, compared exactly, and health stays open', async () => {
  assertError(await post(locked, '/v1/chat/completions', chat()), 401, { code: 'missing_api_key' });
  assertError(await post(locked, '/v1/chat/completions', chat(), { Authorization: `Bearer ${KEY}x` }), 401, {
    code: 'invalid_api_key',
  });
  assertError(await post(locked, '/v1/chat/completions', chat(), { Authorization: KEY }), 401, {
    code: 'invalid_api_key',
  });
  const models = await fetch(locked.url('/v1/models'));
  assert.equal(models.status, 401);
  assert.equal(models.headers.get('www-authenticate'), 'Bearer');
  assert.equal((await post(locked, '/v1/chat/completions', chat(), { Authorization: `Bearer ${KEY}` })).status, 200);
  assert.equal((await getJson(locked, '/health')).status, 200);
});

test('health, metrics, tokenize and detokenize', async () => {
  const h = (await getJson(open, '/health')).json;
  assert.equal(h.status, 'ok');
  assert.equal(h.model, 'tiny');  // the first --alias is the name reported
  assert.equal(h.context_size, 64);
  assert.ok(h.memory.weights_bytes > 0);
  assert.ok(h.requests.finished >= 1);
  const metrics = await (await fetch(open.url('/metrics'))).text();
  assert.match(metrics, /^# HELP strata_model_info/m);
  assert.match(metrics, /^strata_http_requests_total\{route="\/v1\/chat\/completions",status="400"\} \d+$/m);
  assert.match(metrics, /^strata_generation_tokens_total \d+$/m);
  for (const name of ['think_budget_closes', 'think_loop_escapes', 'answer_loop_stops', 'think_router_activations'])
    assert.match(metrics, new RegExp(`^# TYPE strata_${name}_total counter\nstrata_${name}_total 0$`, 'm'));
  const t = await post(open, '/tokenize', { content: 'Lily saw a ball.', add_special: true });
  assert.equal(t.json.tokens[0], 1);
  const d = await post(open, '/detokenize', { tokens: t.json.tokens.slice(1) });
  assert.equal(d.json.content, 'Lily saw a ball.');
});

test('a bad --think-config is a clear start-up error', () => {
  const file = path.join(os.tmpdir(), `strata-think-config-${process.pid}.json`);
  fs.writeFileSync(file, '{"escape": {"close": 5, "default": {"hint": "x"}}}');
  try {
    const r = spawnSync(process.env.STRATA_BIN, ['serve', '--model', modelPath, '--think-config', file], {
      encoding: 'utf8',
      timeout: 30000,
    });
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /^error: --think-config .*strata-think-config-\d+\.json: think control config/m);
  } finally {
    fs.unlinkSync(file);
  }
});
