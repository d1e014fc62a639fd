/**
 * The subrequest counts script mode budgets with (src/script/request-budget.ts) against what the
 * code really calls: one subprocess runs through the governed path with every binding wrapped in a
 * counter (D1 statements and batches, R2 methods, Durable Object stub calls, fetch to OPA). If a
 * change adds a binding call to that path, these counts exceed the budget and this test fails.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { JobExit } from '../../src/contracts/agent-protocol.ts';
import { PolicyDocument } from '../../src/contracts/policy.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { RequestLedger, SUBPROCESS_BASE_SUBREQUESTS, subprocessCost } from '../../src/script/request-budget.ts';
import { EXECUTE_COST } from '../../src/mcp/tools/execute.ts';
import { runGoverned, type GovernedRequest } from '../../src/governed/governed-run.ts';
import { runSubprocess, type SubprocessContext } from '../../src/script/subprocess.ts';
import { SubprocessBudget } from '../../src/script/subprocess-budget.ts';

function exitOf(jobId: string): JobExit {
  return {
    type: 'job.exit',
    jobId,
    state: 'exited',
    exitCode: 0,
    signal: null,
    timedOut: false,
    durationMs: 3,
    stdout: '',
    stderr: '',
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: { stdout: { bytes: 0, lines: 0, artifactTruncated: false }, stderr: { bytes: 0, lines: 0, artifactTruncated: false } },
    artifactsUploaded: true,
  };
}

/** An Env whose every platform call is counted; the team's stored policy is `doc`. */
function countingEnv(doc: unknown, o: { failSubmit?: boolean } = {}) {
  const calls: string[] = [];
  const stmt = (sql: string): unknown => ({
    bind: () => stmt(sql),
    first: async () => {
      calls.push(`d1.first ${sql.slice(0, 40)}`);
      return /FROM policies/.test(sql) ? { version: 1, document: JSON.stringify(doc), updated_by: 'x', updated_at: 1 } : null;
    },
    run: async () => {
      calls.push(`d1.run ${sql.slice(0, 40)}`);
      return { meta: { last_row_id: 1 } };
    },
    all: async () => {
      calls.push(`d1.all ${sql.slice(0, 40)}`);
      return { results: [] };
    },
    raw: async () => {
      calls.push(`d1.raw ${sql.slice(0, 40)}`);
      return [];
    },
  });
  const DB = {
    prepare: (sql: string) => stmt(sql),
    batch: async (s: unknown[]) => {
      calls.push(`d1.batch(${s.length})`);
      return s.map(() => ({ meta: { last_row_id: 1 } }));
    },
  };
  const stub = new Proxy(
    {},
    {
      get: (_t, method: string) => async (req: { spec: { jobId: string } }) => {
        calls.push(`do.${method}`);
        // An `ask` rule opens an approval in the team's object.
        if (method === 'openApproval') return { row: { id: 'ap_AAAAAAAAAAAAAAAAAAAAAA', expires_at: Date.now() + 60_000 }, reused: false };
        if (method !== 'submitAndFollow') return null;
        if (o.failSubmit) throw new Error('Durable Object reset because its code was updated');
        const line = JSON.stringify({ type: 'exit', exit: exitOf(req.spec.jobId), agentId: 'a1', sandbox: 'bwrap' }) + '\n';
        return {
          answer: { ok: true, jobId: req.spec.jobId, state: 'running', agentId: 'a1' },
          events: new ReadableStream({
            start(c) {
              c.enqueue(new TextEncoder().encode(line));
              c.close();
            },
          }),
        };
      },
    },
  );
  const TEAM_DISPATCHER = { idFromName: (n: string) => n, get: () => stub };
  const ARTIFACTS = new Proxy(
    {},
    {
      get: (_t, m: string) => async () => {
        calls.push(`r2.${m}`);
        return null;
      },
    },
  );
  return { env: { DB, TEAM_DISPATCHER, ARTIFACTS } as never, calls };
}

function context(doc: PolicyDocument, env: never, opa = 0): SubprocessContext {
  const ledger = new RequestLedger('paid');
  const opened = ledger.openScript(doc.script.subprocess?.maxCount ?? 0, opa);
  if (!opened.ok) throw new Error(opened.message);
  const signal = new AbortController().signal;
  return {
    ctx: { env, principal: { team: 't', subject: 's', scopes: ['execute'], tokenId: 'tk', issuer: 'i' }, era: 'legacy', waitUntil: () => {} },
    extra: { mcpReq: { id: 1, signal, notify: async () => {}, _meta: {} } } as never,
    script: doc.script,
    scriptId: 'script-1',
    slot: opened.slot,
    budget: { subprocesses: new SubprocessBudget(doc.script.subprocess ?? { maxCount: 0, maxTotalMs: 0 }), progress: 0, closed: false },
    timeouts: { defaultMs: doc.limits.defaultTimeoutMs, maxMs: doc.limits.maxTimeoutMs },
  };
}

const withScript = (extra: Record<string, unknown> = {}) =>
  PolicyDocument.parse({
    ...DEFAULT_POLICY,
    script: { enabled: true, subprocess: { maxCount: 10, maxTotalMs: 60_000 } },
    ...extra,
  });

afterEach(() => vi.unstubAllGlobals());

describe('subrequests of one subprocess', () => {
  it('an allowed subprocess: policy read and one DO call (the DO writes the job and audit rows) — within the budget', async () => {
    const doc = withScript();
    const { env, calls } = countingEnv(doc);
    const r = await runSubprocess(context(doc, env), { op: 'gatehouse_exec', command: 'true', args: [] });
    expect(r.ok).toBe(true);
    expect(calls.map((c) => c.split(' ')[0])).toEqual(['d1.first', 'do.submitAndFollow']);
    expect(calls.length).toBeLessThanOrEqual(SUBPROCESS_BASE_SUBREQUESTS);
  });

  it('a subprocess whose DO call fails: policy read, the DO call and its `failed` audit row (in the team object) — within the budget', async () => {
    const doc = withScript();
    const { env, calls } = countingEnv(doc, { failSubmit: true });
    const r = await runSubprocess(context(doc, env), { op: 'gatehouse_exec', command: 'true', args: [] });
    expect(r.ok).toBe(false);
    expect(calls.map((c) => c.split(' ')[0])).toEqual(['d1.first', 'do.submitAndFollow', 'do.recordAudit']);
    expect(calls.length).toBeLessThanOrEqual(SUBPROCESS_BASE_SUBREQUESTS);
  });

  it('a denied subprocess: policy read and its audit row (in the team object) — within the budget', async () => {
    const doc = withScript();
    const { env, calls } = countingEnv(doc);
    const r = await runSubprocess(context(doc, env), { op: 'gatehouse_exec', command: 'curl', args: ['http://x'] });
    expect(r.ok).toBe(false);
    expect(calls.map((c) => c.split(' ')[0])).toEqual(['d1.first', 'do.recordAudit']);
    expect(calls.length).toBeLessThanOrEqual(SUBPROCESS_BASE_SUBREQUESTS);
  });

  it('each remote OPA evaluator adds one fetch, which the per-subprocess cost includes', async () => {
    const doc = withScript({ opa: { mode: 'all', evaluators: [{ url: 'http://127.0.0.1:9/a' }, { url: 'http://127.0.0.1:9/b' }] } });
    const { env, calls } = countingEnv(doc);
    vi.stubGlobal('fetch', async () => {
      calls.push('fetch');
      return Response.json({ result: { allow: true } });
    });
    const r = await runSubprocess(context(doc, env, 2), { op: 'gatehouse_exec', command: 'true', args: [] });
    expect(r.ok).toBe(true);
    expect(calls.filter((c) => c === 'fetch')).toHaveLength(2);
    expect(calls.length).toBeLessThanOrEqual(subprocessCost(2));
  });
});

/**
 * The same for an `execute` call (what EXECUTE_COST budgets a JSON-RPC batch with):
 * every way through runGoverned that execute and runtime_execute take, against its worst case.
 */
describe('subrequests of one execute call', () => {
  const ctxOf = (env: never) => ({
    ctx: { env, principal: { team: 't', subject: 's', scopes: ['execute'], tokenId: 'tk', issuer: 'i' }, era: 'legacy' as const, waitUntil: () => {} },
    extra: { mcpReq: { id: 1, signal: new AbortController().signal, notify: async () => {}, _meta: {} } } as never,
  });
  const req = (o: Partial<GovernedRequest> = {}): GovernedRequest => ({
    tool: 'execute',
    policy: { mode: 'argv', command: 'true', args: [] },
    job: { mode: 'argv', command: 'true', args: [] },
    ...o,
  });
  const budget = EXECUTE_COST.subrequests;

  it.each([
    ['foreground, allowed', {}, {}],
    ['background', { background: true }, {}],
    ['offered as a task', { task: { afterMs: 0 } }, {}],
    ['the DO call fails', {}, { failSubmit: true }],
    ['denied', { policy: { mode: 'argv', command: 'curl', args: ['http://x'] }, job: { mode: 'argv', command: 'curl', args: ['http://x'] } }, {}],
  ] as const)('%s: within EXECUTE_COST', async (_name, o, envOpts) => {
    const doc = PolicyDocument.parse(DEFAULT_POLICY);
    const { env, calls } = countingEnv(doc, envOpts);
    const { ctx, extra } = ctxOf(env);
    await runGoverned(ctx as never, extra, req(o as Partial<GovernedRequest>));
    expect(calls.length, calls.join(', ')).toBeLessThanOrEqual(budget);
  });

  it('an `ask` rule (an approval opened, the call refused until approved): within EXECUTE_COST', async () => {
    const doc = PolicyDocument.parse({ ...DEFAULT_POLICY, rules: [{ pattern: ['true'], decision: 'ask', reason: 'asked' }], approvals: { askClient: false } });
    const { env, calls } = countingEnv(doc);
    const { ctx, extra } = ctxOf(env);
    const out = await runGoverned(ctx as never, extra, req());
    expect(out.kind).toBe('approval');
    expect(calls.length, calls.join(', ')).toBeLessThanOrEqual(budget);
  });
});
