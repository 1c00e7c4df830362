// Codex CLI (@openai/codex, locked in package-lock.json), run headless (`codex exec`) against
// `strata serve` on the built-in model through the OpenAI Responses API, configured as a local
// provider with the Responses wire API: its requests (developer messages, function tools beside
// namespaces and a web search it may not use, reasoning, streaming, store false) must be accepted
// and its stream parsed, so the turn ends normally. The tiny model's answer is not judged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../server/js/strata_server.mjs';
import { answers, apiKey, runAgent } from './agent_process.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const codex = path.join(here, 'node_modules/.bin/codex');

test('Codex CLI completes an exec task against strata serve', { timeout: 540000 }, async () => {
  // Codex's instructions and tools come to about 10K tokens of the demo model's vocabulary: a
  // context past the 4096 positions it was trained for. Both cores for its prefill.
  process.env.OMP_NUM_THREADS = '2';
  const server = await startServer(['--any-model', '--ctx-size', '65536', '--api-key', apiKey], { model: null });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-codex-'));
  try {
    const home = path.join(work, 'home');
    fs.mkdirSync(path.join(home, '.codex'), { recursive: true });
    fs.writeFileSync(
      path.join(home, '.codex', 'config.toml'),
      [
        'model = "strata-demo"',
        'model_provider = "strata"',
        '',
        '[model_providers.strata]',
        'name = "strata"',
        `base_url = "http://127.0.0.1:${server.port}/v1"`,
        'wire_api = "responses"',
        'env_key = "STRATA_API_KEY"',
        '',
      ].join('\n'),
    );
    const env = {
      PATH: process.env.PATH,
      HOME: home,
      CODEX_HOME: path.join(home, '.codex'),
      STRATA_API_KEY: apiKey,
    };
    const run = await runAgent(codex, ['exec', '--skip-git-repo-check', '--json', 'List the files in this directory.'], env, work);
    const detail = `codex exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}\nserver: ${server.stderr()}`;
    assert.equal(run.code, 0, detail);
    // --json: one event a line; the turn must complete, and no error event may come.
    const events = run.stdout.split('\n').filter((l) => l.trim().startsWith('{')).map((l) => JSON.parse(l));
    assert.ok(events.some((e) => e.type === 'turn.completed'), detail);
    assert.ok(!events.some((e) => e.type === 'error' || e.type === 'turn.failed'), detail);
    const counts = await answers(server, '/v1/responses');
    assert.ok((counts['200'] ?? 0) >= 1, `no /v1/responses request answered 200: ${JSON.stringify(counts)}`);
    for (const status of Object.keys(counts))
      assert.ok(status === '200' || status === '499', `a /v1/responses request answered ${status}: ${JSON.stringify(counts)}`);
  } finally {
    await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
});
