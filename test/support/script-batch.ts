/** A JSON-RPC batch of run_script calls in one HTTP request (the MCP SDK client sends one call per request). */
import { expect } from 'vitest';
import type { Gateway } from '../e2e/harness.ts';

/** Sends `n` run_script calls (each sleeps 1.5 s, then returns its id) as one JSON-RPC batch; the answers, parsed from the SSE body. */
export async function batchOfScripts(g: Pick<Gateway, 'url' | 'token'>, team: string, n: number) {
  const token = await g.token({ team, scopes: ['execute'] });
  const batch = Array.from({ length: n }, (_, i) => ({
    jsonrpc: '2.0', id: i + 1, method: 'tools/call',
    params: { name: 'run_script', arguments: { code: `await sleep(1500); return ${i + 1};` } },
  }));
  const res = await fetch(`${g.url}/mcp`, {
    method: 'POST', body: JSON.stringify(batch),
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', 'MCP-Protocol-Version': '2025-03-26' },
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  const answers = text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)) as {
    id: number; result: { isError?: boolean; structuredContent: { result?: number; error?: { code: string; message: string } } };
  });
  expect(answers.map((a) => a.id).sort()).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  return answers;
}
