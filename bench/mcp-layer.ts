/**
 * CPU of the MCP layer alone, in this Node process (the same V8 as workerd): building the
 * per-request server, `ping`, `tools/list` in both eras, and a `tools/call` that is answered
 * without storage (a token without the tool's scope), through the SDK's own `createMcpHandler`
 * as the gateway uses it. No gateway, no storage, no agent: what is left is the SDK's and our
 * per-request work. `node bench/mcp-layer.ts [n=300]`.
 */
import { register } from 'node:module';

// The MCP modules import a few `cloudflare:` modules (Durable Object base classes) they never
// call here; Node cannot load that scheme, so give it empty stand-ins. Built files the Worker
// imports as text (wrangler's Text rule: the job view's HTML) load as their text, as in the Worker.
register(
  `data:text/javascript,${encodeURIComponent(`
import { readFileSync } from 'node:fs';
export async function resolve(spec, ctx, next) {
  if (spec.startsWith('cloudflare:')) return { url: 'data:text/javascript,export class DurableObject{}; export class WorkerEntrypoint{}; export class RpcTarget{}; export const env={};', shortCircuit: true };
  return next(spec, ctx);
}
export async function load(url, ctx, next) {
  if (url.startsWith('file:') && url.endsWith('.txt')) {
    return { format: 'module', source: 'export default ' + JSON.stringify(readFileSync(new URL(url), 'utf8')), shortCircuit: true };
  }
  return next(url, ctx);
}`)}`,
);

const { createMcpHandler } = await import('@modelcontextprotocol/server');
const { buildServer, onlyToolOf } = await import('../src/mcp/server.ts');
type Ctx = Parameters<typeof buildServer>[0];

const n = Number(process.argv[2] ?? 300);
const ctx = { env: {}, principal: { team: 't', subject: 's', tokenId: 'x', scopes: ['artifacts:read'] }, waitUntil: () => {}, era: 'legacy' } as unknown as Ctx;
// As the gateway builds them (src/mcp/index.ts): a request that only calls one tool gets a server with only that tool
// (`request` below notes which, for the factory).
let onlyTool: ReturnType<typeof onlyToolOf>;
const handler = createMcpHandler(({ era }) => buildServer({ ...ctx, era }, onlyTool), { legacy: 'stateless' });
const streaming = createMcpHandler(({ era }) => buildServer({ ...ctx, era }, onlyTool), { legacy: 'stateless', responseMode: 'sse' });

const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

function request(method: string, params: Record<string, unknown>, modern: boolean): Request {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (modern) {
    Object.assign(headers, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': method });
    if (typeof params.name === 'string') headers['mcp-name'] = params.name;
  } else headers['mcp-protocol-version'] = '2025-11-25';
  onlyTool = onlyToolOf({ method, params });
  return new Request('http://bench/mcp', {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: modern ? { ...params, _meta: MODERN_META } : params }),
  });
}

async function cpuPerOp(name: string, f: () => Promise<unknown>) {
  for (let i = 0; i < 30; i++) await f(); // warm the JIT
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await f();
  const c = process.cpuUsage(c0);
  console.log(`${name.padEnd(38)} ${((c.user + c.system) / 1000 / n).toFixed(2)} ms CPU`);
}

const call = { name: 'execute', arguments: { command: 'true', args: [] } };
const answer = await (await handler.fetch(request('tools/call', call, false))).text();
if (!answer.includes('insufficient_scope')) throw new Error(`unexpected answer: ${answer.slice(0, 200)}`);
await cpuPerOp('build the per-request server', async () => buildServer(ctx));
await cpuPerOp('build the server of one tools/call', async () => buildServer(ctx, 'execute'));
await cpuPerOp('ping (2025 era)', async () => (await handler.fetch(request('ping', {}, false))).text());
await cpuPerOp('tools/list (2025 era)', async () => (await handler.fetch(request('tools/list', {}, false))).text());
await cpuPerOp('tools/list (2026 era)', async () => (await handler.fetch(request('tools/list', {}, true))).text());
await cpuPerOp('tools/call answered at once (2025, SSE)', async () => (await streaming.fetch(request('tools/call', call, false))).text());
await cpuPerOp('tools/call answered at once (2026, SSE)', async () => (await streaming.fetch(request('tools/call', call, true))).text());
await cpuPerOp('tools/call answered at once (2026, JSON)', async () => (await handler.fetch(request('tools/call', call, true))).text());
