/**
 * One structured log line per call — every MCP tool call and every admin API call — and the
 * call's data point in Workers Analytics Engine (src/platform/metrics.ts). Workers Logs indexes
 * the line's fields, so an operator filters on them (`event` = `call`, `team`, `outcome`):
 * docs/operations.md ("Logs") lists them.
 *
 * The line holds who called, what decided and how it ended — never a token, never output, never
 * argument values (the audit log keeps the command; the line keeps only its job id).
 *
 * Each line also says what storage work its request did on the shared stores so far (D1 queries and
 * rows, R2 operations by billing class: src/platform/storage-meter.ts), counted per request by
 * `meterStorage()`; a request with several calls (a JSON-RPC batch) splits it: each line takes what
 * was counted since the previous line, so the lines add up to the request's work.
 *
 * ```ts
 * app.use('*', meterStorage());            // src/index.ts: counts each request's D1 and R2 operations
 * adminRoutes.use('*', adminCallLog());   // an admin API call: its route, status and error code
 * openCall(signal, { surface: 'mcp', tool, principal });  noteCall(signal, { jobId });  closeCall(env, signal, 'ok');
 * ```
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import type { AppEnv } from '../env.ts';
import type { Principal } from '../auth/principal.ts';
import { writeMetric, type MetricsEnv } from '../platform/metrics.ts';
import { meteredBindings, storageCounts, type StorageCounts } from '../platform/storage-meter.ts';

/** What decided a call: allowed (ran or will run), denied, asked a person (and waits), or failed before a decision. */
type CallDecision = 'allowed' | 'denied' | 'asked' | 'failed';

export interface CallLine extends StorageFields {
  event: 'call';
  surface: 'mcp' | 'admin';
  team: string;
  subject: string;
  /** The token's id (`jti`, what `gatehouse token revoke` takes) — never the token. */
  tokenId: string;
  /** The MCP tool, or the admin route as `METHOD pattern` (`DELETE /tokens/:jti`). */
  tool: string;
  /** null: an MCP call that decides nothing (job_status, query_output). Admin calls: allowed, denied (authority) or failed. */
  decision: CallDecision | null;
  /**
   * Which stage decided: a policy stage that denied (`executable`, `rules`, `opa`, …), `approval`
   * for a call a person approves or refuses, `opa` or `policy` for an allowed call.
   */
  stage: string | null;
  jobId: string | null;
  agent: string | null;
  sandbox: string | null;
  latencyMs: number;
  /**
   * How it ended: a job's terminal state (`exited`, `timed_out`, `signaled`, …) or `queued`/`running`
   * for one left running, an error code (`policy_denied`, `no_agent`, `not_found`, …), else `ok`.
   */
  outcome: string;
  /** The job's exit code, when it exited. */
  exitCode: number | null;
  /** Admin API calls: the HTTP status. */
  status?: number;
}

/**
 * The shared stores' billed operations of the call's request (since the previous line of the same
 * request): D1 queries and the rows they read and wrote, R2 Class A and Class B operations. Work the
 * team's Durable Object does for the call is its own invocation's, not in these.
 */
interface StorageFields {
  d1Queries: number;
  d1RowsRead: number;
  d1RowsWritten: number;
  r2ClassA: number;
  r2ClassB: number;
}

/** What a call's code learns on the way and adds to its line. */
export type CallFacts = Partial<Pick<CallLine, 'decision' | 'stage' | 'jobId' | 'agent' | 'sandbox' | 'outcome' | 'exitCode'>>;

interface OpenCall {
  line: Omit<CallLine, 'latencyMs' | 'outcome' | keyof StorageFields> & { outcome: string | null };
  started: number;
}

/**
 * Calls in progress, by a key the call's code shares: for an MCP tool call the request's abort
 * signal (one per call; the SDK keeps it when it copies the call's context).
 */
const open = new WeakMap<object, OpenCall>();

/** Starts the line of a call. */
export function openCall(key: object, base: Pick<CallLine, 'surface' | 'tool'> & { principal: Principal }): void {
  const p = base.principal;
  open.set(key, {
    started: Date.now(),
    line: {
      event: 'call',
      surface: base.surface,
      team: p.team,
      subject: p.subject,
      tokenId: p.tokenId,
      tool: base.tool,
      decision: null,
      stage: null,
      jobId: null,
      agent: null,
      sandbox: null,
      outcome: null,
      exitCode: null,
    },
  });
}

/** Adds what the call learned (a decision, its job, who ran it); nothing when no line is open under `key`. */
export function noteCall(key: object, facts: CallFacts): void {
  const c = open.get(key);
  if (!c) return;
  for (const [k, v] of Object.entries(facts)) if (v !== undefined) (c.line as Record<string, unknown>)[k] = v;
}

/** Ends the call: writes its line and data point once. `outcome` is used unless the call noted its own. */
export function closeCall(env: MetricsEnv, key: object, outcome: string): void {
  const c = open.get(key);
  if (!c) return;
  open.delete(key);
  emitCallLine(env, { ...c.line, outcome: c.line.outcome ?? outcome, latencyMs: Date.now() - c.started, ...takeStorage() });
}

/**
 * Writes one call's line and its data point. The line is logged as an object, not a string:
 * Workers Logs extracts and indexes the fields of a logged object.
 */
function emitCallLine(env: MetricsEnv, line: CallLine): void {
  console.info(line);
  writeMetric(
    env,
    'call',
    line.team,
    {
      surface: line.surface,
      tool: line.tool,
      decision: line.decision,
      stage: line.stage,
      outcome: line.outcome,
      sandbox: line.sandbox,
      agent: line.agent,
    },
    { latency_ms: line.latencyMs },
  );
}

/**
 * The line of an admin API call (mounted on the admin routes, after authentication): the route's
 * pattern (never its values or query), the status, and the error code of a refusal.
 */
export function adminCallLog(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = Date.now();
    try {
      await next();
    } finally {
      const p = c.get('principal');
      const status = c.res.status;
      const code = status >= 400 ? await errorCode(c.res) : null;
      const refused = code === 'forbidden' || code === 'insufficient_scope';
      emitCallLine(c.env, {
        event: 'call',
        surface: 'admin',
        team: p.team,
        subject: p.subject,
        tokenId: p.tokenId,
        tool: `${c.req.method} ${adminRoute(routePath(c))}`,
        decision: status < 400 ? 'allowed' : refused ? 'denied' : 'failed',
        stage: refused ? 'authority' : null,
        jobId: null,
        agent: null,
        sandbox: null,
        latencyMs: Date.now() - started,
        outcome: code ?? (status < 400 ? 'ok' : `http_${status}`),
        exitCode: null,
        status,
        ...takeStorage(),
      });
    }
  };
}

/** The route as the API documents it: without the mount (`/admin/v1`, `/dashboard/api/v1`) or `/teams/:team`. */
function adminRoute(pattern: string): string {
  const route = pattern.replace(/^\/(admin|dashboard\/api)\/v1/, '').replace(/^\/teams\/:team/, '');
  return route === '/*' || route === '*' ? '(no route)' : route || '/';
}

/** The `error.code` of an admin API error answer (`{"error":{"code","message"}}`), read from a copy. */
async function errorCode(res: Response): Promise<string | null> {
  if (!res.headers.get('Content-Type')?.includes('application/json')) return null;
  try {
    const body = (await res.clone().json()) as { error?: { code?: unknown } };
    return typeof body.error?.code === 'string' ? body.error.code.slice(0, 64) : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------- storage work per request

/** The counts of the request being served (each request runs inside its own). */
const requestCounts = new AsyncLocalStorage<StorageCounts>();
const currentCounts = () => requestCounts.getStore();

/**
 * Counts the request's D1 and R2 operations: `c.env` becomes a view whose `DB` and `ARTIFACTS` count
 * into the request's counts (one view per env object, so what is cached per env stays cached).
 */
export function meterStorage(): MiddlewareHandler<AppEnv> {
  return (c, next) => {
    c.env = meteredBindings(c.env, currentCounts);
    return requestCounts.run(storageCounts(), next);
  };
}

/** What the request counted since the previous take (all zero outside a metered request). */
function takeStorage(): StorageFields {
  const c = requestCounts.getStore();
  if (!c) return { d1Queries: 0, d1RowsRead: 0, d1RowsWritten: 0, r2ClassA: 0, r2ClassB: 0 };
  const taken = { d1Queries: c.d1Queries, d1RowsRead: c.d1RowsRead, d1RowsWritten: c.d1RowsWritten, r2ClassA: c.r2ClassA, r2ClassB: c.r2ClassB };
  Object.assign(c, storageCounts());
  return taken;
}

/**
 * The storage line of a request that writes no call line but may touch the stores: an agent's
 * artifact upload, its socket's upgrade. Written only when the request did some storage work.
 */
interface StorageLine extends StorageFields {
  event: 'storage';
  surface: 'agent';
  team: string | null;
  /** The route as `METHOD pattern` (`PUT /agent/v1/artifacts/:handle/:stream`), never its values. */
  route: string;
  status: number;
}

export function agentStorageLog(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    try {
      await next();
    } finally {
      const s = takeStorage();
      if (s.d1Queries + s.r2ClassA + s.r2ClassB > 0) {
        const line: StorageLine = {
          event: 'storage',
          surface: 'agent',
          team: c.get('principal')?.team ?? null,
          route: `${c.req.method} ${routePath(c, -1)}`,
          status: c.res.status,
          ...s,
        };
        console.info(line);
      }
    }
  };
}
