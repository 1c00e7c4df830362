// Claude Code (@anthropic-ai/claude-code, locked in package-lock.json), run headless in print mode
// against `strata serve` on the built-in model through the Anthropic Messages API: its requests (a
// system prompt of text blocks with cache_control, a system message among the messages, 20-odd
// tools, adaptive thinking, streaming, x-api-key) must be accepted and its stream parsed, so the
// agent's loop ends a turn normally. The tiny model's answer is not judged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from '../server/js/strata_server.mjs';
import { answers, apiKey, runAgent } from './agent_process.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const claude = path.join(here, 'node_modules/.bin/claude');

test('Claude Code completes a print-mode task against strata serve', { timeout: 540000 }, async () => {
  // Claude Code's system prompt and tool schemas alone are about 16K tokens of the demo model's
  // vocabulary: the context goes past the 4096 positions it was trained for (a warning, and a
  // demo's answer). Both cores for its prefill.
  process.env.OMP_NUM_THREADS = '2';
  const server = await startServer(['--any-model', '--ctx-size', '65536', '--api-key', apiKey], { model: null });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'strata-claude-'));
  try {
    const env = {
      PATH: process.env.PATH,
      HOME: work,
      ANTHROPIC_BASE_URL: `http://127.0.0.1:${server.port}`,
      ANTHROPIC_API_KEY: apiKey,
      // Nothing but the loopback server: no telemetry, updates or error reports.
      DISABLE_TELEMETRY: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_ERROR_REPORTING: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    };
    const run = await runAgent(
      claude,
      ['-p', 'List the files in this directory, then say what you found.', '--output-format', 'json', '--max-turns', '3'],
      env,
      work,
    );
    assert.equal(run.code, 0, `claude exited ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}\nserver: ${server.stderr()}`);
    const result = JSON.parse(run.stdout);
    assert.equal(result.is_error, false, `the agent reported an error: ${run.stdout}`);
    assert.equal(result.terminal_reason, 'completed', run.stdout);
    assert.equal(result.type, 'result');
    assert.ok(result.num_turns >= 1, run.stdout);
    // Its whole prompt reached the model, and the usage it read back is the server's.
    assert.ok(result.usage.input_tokens > 4096, `input_tokens ${result.usage.input_tokens}`);
    assert.ok(result.usage.output_tokens >= 1, run.stdout);
    const counts = await answers(server, '/v1/messages');
    assert.ok((counts['200'] ?? 0) >= 1, `no /v1/messages request answered 200: ${JSON.stringify(counts)}`);
    for (const status of Object.keys(counts))
      assert.ok(status === '200' || status === '499', `a /v1/messages request answered ${status}: ${JSON.stringify(counts)}`);
  } finally {
    await server.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
});
