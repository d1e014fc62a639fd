/**
 * The team DO's capabilities as the DO wires them (src/dispatch/capabilities.ts), over node:sqlite,
 * fake agent sockets and a clock the test moves; with the requests and messages tests send.
 */
import { PROTOCOL_VERSION, type AgentHello, type JobExit, type JobSpec } from '../../src/contracts/agent-protocol.ts';
import { capabilities } from '../../src/dispatch/capabilities.ts';
import type { DispatchRequest } from '../../src/dispatch/events.ts';
import { workersPlan } from '../../src/platform/plan.ts';
import { dispatchHost, FakeSocket, type TestHost } from './sql-host.ts';

export const HB = 1000;

/** A D1 stand-in that records the statements each batch carries. */
function fakeDb(batches: string[][]) {
  const stmt = (sql: string) => ({ sql, bind: () => stmt(sql), first: async () => null, run: async () => ({ meta: {} }), all: async () => ({ results: [] }) });
  return { prepare: stmt, batch: async (s: { sql: string }[]) => (batches.push(s.map((x) => x.sql.trim().split(/\s+/)[0])), s.map(() => ({ meta: {} }))) };
}

export function setup(o: { plan?: string; host?: TestHost } = {}) {
  const batches: string[][] = [];
  const host = o.host ?? dispatchHost({ heartbeatMs: HB, env: { DB: fakeDb(batches) as never, GATEHOUSE_WORKERS_PLAN: o.plan ?? 'paid' } });
  const trace: string[] = [];
  const c = capabilities(host, { plan: workersPlan(host.env), trace: (s) => trace.push(s) });
  return { host, c, batches, trace };
}

/** A real agent's hello (capacity 2, bwrap, nothing running), with what a test changes. */
export const helloOf = (agentId: string, o: Partial<AgentHello> = {}): AgentHello => ({
  type: 'hello',
  v: PROTOCOL_VERSION,
  agentId,
  version: '1',
  capacity: 2,
  sandbox: 'bwrap',
  runtimes: [],
  labels: [],
  running: [],
  ...o,
});

/** An agent socket the Worker authenticated (subject, token) that said hello. */
export async function connect(t: ReturnType<typeof setup>, agentId: string, subject = `agent-${agentId}`): Promise<FakeSocket> {
  const ws = new FakeSocket();
  t.host.socketList.push(ws);
  const att = t.c.link.attachmentFor(new Request('https://x/', { headers: { 'X-Gatehouse-Subject': subject, 'X-Gatehouse-Token-Id': `tok-${subject}` } }));
  if (!att.ok) throw new Error(att.message);
  t.c.link.attach(ws as unknown as WebSocket, att.att);
  await say(t, ws, helloOf(agentId));
  return ws;
}

export const say = (t: ReturnType<typeof setup>, ws: FakeSocket, m: unknown) =>
  t.c.messages.receive(ws as unknown as WebSocket, typeof m === 'string' ? m : JSON.stringify(m));

/** A small job's spec (`true` unless `extra` says otherwise): the one every test of the object's stores starts from. */
export const specOf = (id: string, extra: Partial<JobSpec> = {}): JobSpec => ({
  jobId: id,
  artifactHandle: `art_${id}`,
  mode: 'argv',
  command: 'true',
  args: [],
  cwd: '',
  env: {},
  timeoutMs: 1000,
  limits: { inlineBytes: 1000, artifactBytes: 1000 },
  ...extra,
});

export const request = (id: string, o: Partial<DispatchRequest> = {}): DispatchRequest => ({
  spec: specOf(id, { command: 'echo', args: ['hi'] }),
  cancelKey: `k-${id}`,
  tool: 'execute',
  subject: 'alice',
  tokenId: 't1',
  maxConcurrentJobs: 4,
  queueWaitMs: 5000,
  maxQueueLength: 10,
  background: false,
  audit: { at: 1, reason: 'rule r1', command: ['echo', 'hi'] },
  ...o,
});

export const exitOf = (id: string, stdout: string): JobExit => ({
  type: 'job.exit',
  jobId: id,
  state: 'exited',
  exitCode: 0,
  signal: null,
  timedOut: false,
  durationMs: 5,
  stdout,
  stderr: '',
  stdoutTruncated: false,
  stderrTruncated: false,
  artifactsUploaded: true,
  streams: { stdout: { bytes: stdout.length, lines: 1, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
});
