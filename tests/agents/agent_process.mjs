// What the real-agent tests share: running an agent binary to its end, and reading the server's
// answers on a route by status from /metrics.
import { spawn } from 'node:child_process';

export const apiKey = 'strata-agent-test-key';

// Runs `bin` with args to its end: {code, stdout, stderr}.
export function runAgent(bin, args, env, cwd) {
  return new Promise((resolve, reject) => {
    const proc = spawn(bin, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    proc.on('error', reject);
    proc.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

// The server's count of answers on a route by status, from /metrics (with the tests' API key).
export async function answers(server, route) {
  const text = await (await fetch(server.url('/metrics'), { headers: { Authorization: `Bearer ${apiKey}` } })).text();
  const counts = {};
  const re = new RegExp(`strata_http_requests_total\\{route="${route.replace(/\//g, '\\/')}",status="(\\d+)"\\} (\\d+)`, 'g');
  for (const m of text.matchAll(re)) counts[m[1]] = Number(m[2]);
  return counts;
}
