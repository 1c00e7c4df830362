// Starts `strata serve` on a free loopback port (--port 0; the port is read from its start-up
// line) for the integration tests, and stops it with SIGTERM.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = process.env.STRATA_SHARED_FIXTURES ?? path.resolve(here, '../../../../shared/fixtures');
export const modelPath = path.join(fixtures, 'models/stories260K/stories260K.gguf');
export const modelId = 'stories260K';
export const expectedGreedyPath = path.join(fixtures, 'models/stories260K/expected_greedy.txt');

// options.model: the model to serve; null serves the built-in default (no --model).
export async function startServer(extraArgs = [], options = {}) {
  const model = options.model === undefined ? modelPath : options.model;
  const bin = process.env.STRATA_BIN;
  if (!bin) throw new Error('STRATA_BIN must name the strata binary');
  // One compute thread: the model is tiny, and ctest runs other tests beside this one; OpenMP
  // threads spinning at barriers on a busy 2-core machine made each token take ~60 ms.
  const env = { OMP_NUM_THREADS: '1', OPENBLAS_NUM_THREADS: '1', ...process.env };
  const modelArgs = model === null ? [] : ['--model', model];
  const proc = spawn(bin, ['serve', ...modelArgs, '--port', '0', ...extraArgs], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env,
  });
  let stderr = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`strata serve did not start:\n${stderr}`)), 30000);
    proc.stderr.on('data', (d) => {
      stderr += d;
      const m = stderr.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => reject(new Error(`strata serve exited (${code}):\n${stderr}`)));
  });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    port,
    baseURL: `http://127.0.0.1:${port}/v1`,
    url: (p) => `http://127.0.0.1:${port}${p}`,
    stderr: () => stderr,
    exited,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      return exited;
    },
  };
}

// POSTs JSON (or a raw string) and returns {status, json, text}.
export async function post(server, route, body, headers = {}) {
  const res = await fetch(server.url(route), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, json, text };
}

export async function getJson(server, route, headers = {}) {
  const res = await fetch(server.url(route), { headers });
  return { status: res.status, json: await res.json() };
}
