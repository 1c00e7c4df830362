// Many clients at once, clients that hang up, and shutdown, against one strata serve process:
// parallel streams all complete and each equals the same request served alone; a disconnect frees
// the engine at once; SIGTERM lets a stream in progress finish, then the server exits.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, getJson, modelId } from './strata_server.mjs';

const CLIENTS = 24;
let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.stop();
});

const prompts = ['Once upon a time', 'Lily and Tom', 'The big dog', 'One day, a bird', 'Sue had a red ball'];

function request(i) {
  return {
    model: modelId,
    messages: [{ role: 'user', content: prompts[i % prompts.length] }],
    max_tokens: 48,
    temperature: 0.9,
    seed: 1000 + i,
    stream: true,
  };
}

async function streamText(params) {
  const stream = await client.chat.completions.create(params);
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

test(`${CLIENTS} parallel streaming clients all complete, none mixed up`, async () => {
  const t0 = performance.now();
  const alone = [];
  for (let i = 0; i < CLIENTS; i++) alone.push(await streamText(request(i)));
  const sequentialMs = performance.now() - t0;

  const t1 = performance.now();
  const together = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => streamText(request(i))));
  const parallelMs = performance.now() - t1;

  for (let i = 0; i < CLIENTS; i++) {
    assert.ok(together[i].finish, `client ${i} got no finish_reason`);
    assert.deepEqual(together[i], alone[i], `client ${i} differs from the same request served alone`);
  }
  assert.ok(new Set(alone.map((r) => r.text)).size > CLIENTS / 2, 'seeds and prompts should give varied texts');
  console.log(
    `# ${CLIENTS} streams of 48 tokens: one after another ${sequentialMs.toFixed(0)} ms, ` +
      `all at once ${parallelMs.toFixed(0)} ms`,
  );
});

async function waitForHealth(predicate, limitMs) {
  const t0 = performance.now();
  for (;;) {
    const h = (await getJson(server, '/health')).json;
    if (predicate(h) || performance.now() - t0 > limitMs) return { h, ms: performance.now() - t0 };
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('a client that disconnects has its generation cancelled and the engine freed', async () => {
  const before = (await getJson(server, '/health')).json.requests.cancelled;
  const abort = new AbortController();
  const stream = await client.chat.completions.create(
    { model: modelId, messages: [{ role: 'user', content: 'Tell a long story' }], max_tokens: 1900, ignore_eos: true, stream: true },
    { signal: abort.signal },
  );
  let received = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content && ++received === 3) {
        abort.abort();  // hang up
        break;
      }
    }
  } catch (e) {
    assert.match(String(e?.name), /Abort/);
  }
  assert.equal(received, 3);
  const { h, ms } = await waitForHealth((x) => x.requests.cancelled === before + 1 && x.requests.running === 0, 5000);
  assert.equal(h.requests.cancelled, before + 1);
  assert.equal(h.requests.running, 0);
  assert.ok(h.tokens.generated < 100000);
  console.log(`# disconnect noticed and generation cancelled within ${ms.toFixed(0)} ms`);

  const t0 = performance.now();
  const next = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 });
  assert.ok(next.choices[0].message.content.length > 0);
  assert.ok(performance.now() - t0 < 2000, 'the next request is served promptly');
});

test('SIGTERM: a stream in progress finishes, new connections are refused, the process exits 0', async () => {
  const own = await startServer();
  const sdk = new OpenAI({ baseURL: own.baseURL, apiKey: 'unused', maxRetries: 0 });
  const stream = await sdk.chat.completions.create({
    model: modelId,
    messages: [{ role: 'user', content: 'Once upon a time' }],
    max_tokens: 600,
    ignore_eos: true,
    stream: true,
  });
  let text = '';
  let finish = null;
  let signalled = false;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
    if (!signalled && text.length > 0) {
      signalled = true;
      own.stop();  // SIGTERM while generating
      await new Promise((r) => setTimeout(r, 50));
      await assert.rejects(fetch(own.url('/health')));
    }
  }
  assert.equal(finish, 'length');
  const { code } = await own.exited;
  assert.equal(code, 0);
});
