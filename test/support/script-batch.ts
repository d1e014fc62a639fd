/** A JSON-RPC batch of run_script calls in one HTTP request (the MCP SDK client sends one call per request). */
import { expect } from 'vitest';
import type { Gateway } from '../e2e/harness.ts';

/** Sends `n` run_script calls (each sleeps 1.5 s, then returns its id) as one JSON-RPC batch; the answers, parsed from the SSE body. */
export async function batchOfScripts(g: Pick<Gateway, 'url' | 'token'>, team: string, n: number) {
  const token = await g.token({ team, scopes: ['execute'] });
  const batch = Array.from({ length: n }, (_, i) => ({
    jsonrpc: '2.0',
    id: i + 1,
    method: 'tools/call',
    params: { name: 'run_script', arguments: { code: `await sleep(1500); return ${i + 1};` } },
  }));
  const res = await fetch(`${g.url}/mcp`, {
    method: 'POST',
    body: JSON.stringify(batch),
    headers: {
      Authorization: `Bearer ${token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2025-03-26',
    },
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  const answers = text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map(
      (l) =>
        JSON.parse(l.slice(6)) as {
          id: number;
          result: { isError?: boolean; structuredContent: { result?: number; error?: { code: string; message: string } } };
        },
    );
  expect(answers.map((a) => a.id).sort()).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  return answers;
}

export type BatchAnswer = { id: number; result?: { isError?: boolean; structuredContent: Record<string, any> }; error?: { code: number; message: string } };

/** POSTs `messages` as one JSON-RPC batch (2025-03-26 era, the last with batches); the status and the answers (SSE or JSON). */
export async function postBatch(
  g: Pick<Gateway, 'url' | 'token'>,
  team: string,
  messages: unknown[],
): Promise<{ status: number; answers: BatchAnswer[]; body: string }> {
  const token = await g.token({ team, scopes: ['execute'] });
  const res = await fetch(`${g.url}/mcp`, {
    method: 'POST',
    body: JSON.stringify(messages),
    headers: {
      Authorization: `Bearer ${token}`,
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2025-03-26',
    },
  });
  const body = await res.text();
  const sse = body
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)) as BatchAnswer);
  const answers = sse.length
    ? sse
    : (() => {
        try {
          const j = JSON.parse(body);
          return Array.isArray(j) ? j : [j];
        } catch {
          return [];
        }
      })();
  return { status: res.status, answers, body };
}

/** `n` tools/call messages of `name` with `args`, ids from `firstId`. */
export function toolCalls(name: string, args: Record<string, unknown>, n: number, firstId = 1): unknown[] {
  return Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: firstId + i, method: 'tools/call', params: { name, arguments: args } }));
}
