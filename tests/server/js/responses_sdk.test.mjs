// strata serve's Responses API driven by the official OpenAI SDK, serving the built-in strata-demo
// with the prompts of its transformers goldens (tests/fixtures/demo/strata-demo.json):
// responses.create whole and streamed (the ResponseStream helper's events and finalResponse, and
// raw stream: true events in order), a function-call round trip whose prompts count the goldens'
// tokens and whose answer is transformers' greedy text, reasoning effort on and off,
// previous_response_id, retrieve and delete, store: false, max_output_tokens, and errors as the
// SDK's typed errors.
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

const model = 'strata-demo';
let server;
let client;
before(async () => {
  server = await startServer([], { model: null });
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'strata serve exits cleanly on SIGTERM');
});

// The golden reply (transformers' greedy text) split into its thinking and its answer.
function golden(c) {
  const text = c.reply.replace(/<\|im_end\|>[\s\S]*$/, '');
  const [thinking, answer] = text.includes('\n</think>\n\n') ? text.split('\n</think>\n\n') : ['', text];
  return { thinking, answer };
}

// A golden's tools in the Responses API's flat shape.
function tools(c) {
  return c.tools.map((t) => ({ type: 'function', name: t.function.name, description: t.function.description,
                               parameters: t.function.parameters, strict: false }));
}

// A golden's conversation as Responses parameters: system messages as instructions.
function params(c, extra = {}) {
  const instructions = c.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n');
  const input = c.messages.filter((m) => m.role !== 'system').map((m) => ({ role: m.role, content: m.content }));
  return { model, temperature: 0, input, ...(instructions ? { instructions } : {}), ...extra };
}

function reasoningText(response) {
  const item = response.output.find((o) => o.type === 'reasoning');
  return item ? item.content.map((p) => p.text).join('') : '';
}

test('responses.create answers with a reasoning item and a message, the goldens greedy text', async () => {
  const c = byName.system_identity;
  const r = await client.responses.create(params(c));
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.equal(r.model, model);
  assert.equal(r.error, null);
  assert.equal(r.instructions, c.messages[0].content);
  assert.deepEqual(r.output.map((o) => o.type), ['reasoning', 'message']);
  const { thinking, answer } = golden(c);
  assert.equal(reasoningText(r), thinking);
  assert.deepEqual(r.output[0].summary, []);
  assert.match(r.output[0].id, /^rs_/);
  const message = r.output[1];
  assert.match(message.id, /^msg_/);
  assert.equal(message.role, 'assistant');
  assert.equal(message.status, 'completed');
  assert.deepEqual(message.content.map((p) => p.type), ['output_text']);
  assert.equal(message.content[0].text, answer);
  assert.equal(r.output_text, answer);  // the SDK's own sum of the output text
  assert.equal(r.usage.input_tokens, c.prompt_ids.length);
  assert.ok(r.usage.output_tokens > 0);
  assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
});

test('client.responses.stream gives text events and a finalResponse equal to the whole response', async () => {
  const c = byName.system_identity;
  const whole = await client.responses.create(params(c));
  const stream = client.responses.stream(params(c));
  let text = '';
  let reasoning = '';
  stream.on('response.output_text.delta', (e) => { text += e.delta; });
  stream.on('response.reasoning_text.delta', (e) => { reasoning += e.delta; });
  const final = await stream.finalResponse();
  assert.equal(text, golden(c).answer);
  assert.equal(reasoning, golden(c).thinking);
  assert.equal(final.status, 'completed');
  assert.equal(final.output_text, whole.output_text);
  assert.deepEqual(final.output.map((o) => o.type), whole.output.map((o) => o.type));
  assert.equal(reasoningText(final), reasoningText(whole));
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens);
  assert.notEqual(final.id, whole.id);
});

test('stream: true gives the raw events in order, with increasing sequence numbers', async () => {
  const stream = await client.responses.create({ ...params(byName.arithmetic), stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 2), ['response.created', 'response.in_progress']);
  assert.equal(types.at(-1), 'response.completed');
  events.forEach((e, i) => assert.equal(e.sequence_number, i));
  // Items one after another, each opened, filled and closed.
  const runs = types.filter((t, i) => !t.endsWith('.delta') || types[i - 1] !== t);
  assert.deepEqual(runs.slice(2, -1), [
    'response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta',
    'response.reasoning_text.done', 'response.content_part.done', 'response.output_item.done',
    'response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
  ]);
  const done = events.at(-1).response;
  assert.equal(done.output[1].content[0].text, golden(byName.arithmetic).answer);
  const deltas = events.filter((e) => e.type === 'response.output_text.delta');
  assert.ok(deltas.every((e) => e.item_id === done.output[1].id && e.output_index === 1 && e.content_index === 0));

  // On the wire each event is named by an event: line.
  const res = await fetch(server.url('/v1/responses'), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...params(byName.arithmetic), stream: true }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const frames = (await res.text()).split('\n\n').filter(Boolean);
  for (const frame of frames) {
    const m = frame.match(/^event: ([\w.]+)\ndata: (.*)$/s);
    assert.ok(m, frame);
    assert.equal(JSON.parse(m[2]).type, m[1]);
  }
});

test('function call round trip: a function_call item, then its output answered as transformers answers', async () => {
  const call = byName.tool_call_weather;
  const first = await client.responses.create(params(call, { tools: tools(call) }));
  assert.equal(first.status, 'completed');
  const fc = first.output.find((o) => o.type === 'function_call');
  assert.ok(fc, JSON.stringify(first.output));
  assert.match(fc.id, /^fc_/);
  assert.match(fc.call_id, /^call_/);
  assert.equal(fc.name, 'get_weather');
  assert.deepEqual(JSON.parse(fc.arguments), { city: 'Paris' });
  assert.equal(first.usage.input_tokens, call.prompt_ids.length);

  // Streamed, the arguments arrive through their events and the helper has them.
  let args = '';
  const stream = client.responses.stream(params(call, { tools: tools(call) }));
  stream.on('response.function_call_arguments.delta', (e) => { args += e.delta; });
  const streamed = await stream.finalResponse();
  assert.equal(args, fc.arguments);
  assert.deepEqual(JSON.parse(streamed.output.find((o) => o.type === 'function_call').arguments), { city: 'Paris' });

  // The answer: the call's output sent back, with the whole conversation or after previous_response_id.
  const answer = byName.tool_response_weather;
  const result = answer.messages.find((m) => m.role === 'tool').content;
  const output = { type: 'function_call_output', call_id: fc.call_id, output: result };
  const whole = await client.responses.create(params(answer, {
    tools: tools(answer),
    input: [{ role: 'user', content: answer.messages[0].content }, fc, output],
  }));
  assert.equal(whole.usage.input_tokens, answer.prompt_ids.length, 'the prompt is the golden prompt');
  assert.equal(whole.output_text, golden(answer).answer);
  const continued = await client.responses.create({
    model, temperature: 0, tools: tools(answer), previous_response_id: first.id, input: [output],
  });
  assert.equal(continued.previous_response_id, first.id);
  // Continued, the first response's reasoning item goes back too (the golden conversation has
  // none): the prompt is that of the whole conversation with every output item sent again.
  const resent = await client.responses.create({
    model, temperature: 0, tools: tools(answer),
    input: [{ role: 'user', content: answer.messages[0].content }, ...first.output, output],
  });
  assert.equal(continued.usage.input_tokens, resent.usage.input_tokens);
  assert.ok(continued.usage.input_tokens > answer.prompt_ids.length);
  assert.equal(continued.output_text, resent.output_text);

  // tool_choice required and parallel_tool_calls false give one call.
  const forced = await client.responses.create(params(call, {
    tools: tools(call), tool_choice: 'required', parallel_tool_calls: false,
  }));
  assert.equal(forced.output.filter((o) => o.type === 'function_call').length, 1);
  const named = await client.responses.create(params(call, {
    tools: tools(call), tool_choice: { type: 'function', name: 'lookup_word' },
  }));
  assert.equal(named.output.find((o) => o.type === 'function_call').name, 'lookup_word');
});

test('reasoning effort none answers without reasoning; high reasons', async () => {
  const c = byName.no_thinking_quote;
  const off = await client.responses.create(params(c, { reasoning: { effort: 'none' } }));
  assert.deepEqual(off.output.map((o) => o.type), ['message']);
  assert.equal(off.output_text, golden(c).answer);
  assert.equal(off.usage.input_tokens, c.prompt_ids.length);
  assert.equal(off.reasoning.effort, 'none');
  const on = await client.responses.create(params(byName.arithmetic, { reasoning: { effort: 'high' } }));
  assert.deepEqual(on.output.map((o) => o.type), ['reasoning', 'message']);
  assert.equal(reasoningText(on), golden(byName.arithmetic).thinking);
});

test('previous_response_id continues a stored response; retrieve and delete it', async () => {
  const [user1, , user2] = byName.multi_turn_jargon.messages;
  const first = await client.responses.create({ model, temperature: 0, input: [{ role: 'user', content: user1.content }],
                                                reasoning: { effort: 'none' } });
  const fetched = await client.responses.retrieve(first.id);
  assert.deepEqual(fetched, first);
  // Continued with the next question: the prompt is the first turn's, its answer, and the question.
  const next = await client.responses.create({ model, temperature: 0, previous_response_id: first.id,
                                               input: user2.content, reasoning: { effort: 'none' } });
  const sent = await client.responses.create({
    model, temperature: 0, reasoning: { effort: 'none' },
    input: [{ role: 'user', content: user1.content }, { role: 'assistant', content: first.output_text },
            { role: 'user', content: user2.content }],
  });
  assert.equal(next.usage.input_tokens, sent.usage.input_tokens);
  assert.equal(next.output_text, sent.output_text);

  await client.responses.delete(first.id);
  await assert.rejects(client.responses.retrieve(first.id),
                       (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(
    client.responses.create({ model, previous_response_id: first.id, input: 'Hi' }),
    (e) => e instanceof OpenAI.NotFoundError && e.param === 'previous_response_id',
  );
  const unkept = await client.responses.create({ model, input: 'Hi', store: false, max_output_tokens: 4 });
  assert.equal(unkept.store, false);
  await assert.rejects(client.responses.retrieve(unkept.id), (e) => e instanceof OpenAI.NotFoundError);
});

test('max_output_tokens ends a response incomplete', async () => {
  const r = await client.responses.create(params(byName.arithmetic, { max_output_tokens: 5 }));
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(r.usage.output_tokens, 5);
  const streamed = await client.responses.stream(params(byName.arithmetic, { max_output_tokens: 5 })).finalResponse();
  assert.equal(streamed.status, 'incomplete');
  assert.equal(reasoningText(streamed), reasoningText(r));
});

test('errors surface as the SDK\'s typed errors', async () => {
  await assert.rejects(
    client.responses.create(params(byName.arithmetic, { model: 'gpt-9' })),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found',
  );
  await assert.rejects(
    client.responses.create(params(byName.arithmetic, { temperature: 3 })),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature',
  );
  await assert.rejects(
    client.responses.create(params(byName.arithmetic, { text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', patternProperties: { '^a': { type: 'string' } } } } } })),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'text.format' && /patternProperties/.test(e.message),
  );
  await assert.rejects(
    client.responses.create({ model, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] }),
    (e) => e instanceof OpenAI.BadRequestError && /text-only/.test(e.message),
  );
  await assert.rejects(client.responses.retrieve('resp_missing'), (e) => e instanceof OpenAI.NotFoundError);
});
