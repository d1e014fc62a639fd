/**
 * Admin: the team at a glance, for the dashboard's landing page — agents online and their slots,
 * the last hour's jobs by state, denials, pending approvals and the most recent failed jobs.
 * `GET /admin/v1/overview`. Counts come from D1 (the jobs index the team's Durable Object copies
 * its jobs to, the audit log, approvals), so a job of the last second may be missing; agents, the
 * queue and the last job's timing (`dispatcher`) come from the Durable Object itself. Every read is bounded, whatever the team's history holds.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { dispatchHealth, listAllAgents } from '../dispatch/client.ts';
import { approvalView, listApprovals } from '../approval/store.ts';
import { parseJson } from '../store/audit.ts';

export const overviewRoutes = new Hono<AppEnv>();

const OVERVIEW_WINDOW_MS = 3600_000;
/** Failed jobs are looked for this far back (a morning look at the night's failures). */
const FAILURE_WINDOW_MS = 24 * 3600_000;
/** The audit rows read to count denials: the newest ones (a count past this says "at least"). */
const AUDIT_SCAN = 5000;
const PENDING_MAX = 200;
const RECENT = 5;
const FAILURES = 8;
/** How a job fails: a terminal state other than a clean exit, or an exit with a non-zero code. */
const FAILED_JOB = `(state IN ('signaled', 'timed_out', 'lost', 'failed_to_start', 'refused') OR (state = 'exited' AND exit_code <> 0))`;

overviewRoutes.get('/', async (c) => {
  const team = c.get('principal').team;
  const now = Date.now();
  const since = now - OVERVIEW_WINDOW_MS;
  const db = c.env.DB;
  const [agents, health, byState, denials, recentDenials, failures, pending] = await Promise.all([
    listAllAgents(c.env, team),
    dispatchHealth(c.env, team),
    db.prepare('SELECT state, COUNT(*) AS n FROM jobs WHERE team = ? AND created_at >= ? GROUP BY state').bind(team, since).all<{ state: string; n: number }>(),
    db
      .prepare(`SELECT COUNT(*) AS n, COALESCE(SUM(decision = 'denied'), 0) AS denied
                FROM (SELECT at, decision FROM audit WHERE team = ? ORDER BY id DESC LIMIT ?) WHERE at >= ?`)
      .bind(team, AUDIT_SCAN, since)
      .first<{ n: number; denied: number }>(),
    db
      .prepare(`SELECT id, at, tool, subject, command, cwd, reason
                FROM (SELECT id, at, tool, subject, command, cwd, reason, decision FROM audit WHERE team = ? ORDER BY id DESC LIMIT ?)
                WHERE decision = 'denied' AND at >= ? ORDER BY id DESC LIMIT ?`)
      .bind(team, AUDIT_SCAN, since, RECENT)
      .all<{ id: number; at: number; tool: string; subject: string; command: string | null; cwd: string | null; reason: string | null }>(),
    db
      .prepare(`SELECT id, tool, state, exit_code, signal, subject, created_at, ended_at, error FROM jobs
                WHERE team = ? AND created_at >= ? AND ${FAILED_JOB} ORDER BY created_at DESC LIMIT ?`)
      .bind(team, now - FAILURE_WINDOW_MS, FAILURES)
      .all<{
        id: string;
        tool: string;
        state: string;
        exit_code: number | null;
        signal: string | null;
        subject: string | null;
        created_at: number;
        ended_at: number | null;
        error: string | null;
      }>(),
    listApprovals(db, team, { status: 'pending', limit: PENDING_MAX, now }),
  ]);
  const online = agents.filter((a) => a.state === 'connected');
  const jobStates: Record<string, number> = {};
  for (const r of byState.results) jobStates[r.state] = r.n;
  return c.json({
    now,
    since,
    agents: {
      online: online.length,
      total: agents.length,
      capacity: online.reduce((n, a) => n + a.capacity, 0),
      running: online.reduce((n, a) => n + a.running, 0),
    },
    // The team's Durable Object's own counters, live (the job counts below come from D1's copy).
    dispatcher: health,
    jobs: { byState: jobStates, total: byState.results.reduce((n, r) => n + r.n, 0) },
    denials: {
      count: denials?.denied ?? 0,
      // Only the newest AUDIT_SCAN rows were read and all of them are from the last hour: there may be more.
      atLeast: (denials?.n ?? 0) >= AUDIT_SCAN,
      recent: recentDenials.results.map((d) => ({ ...d, command: parseJson(d.command) })),
    },
    approvals: { pending: pending.length, atLeast: pending.length >= PENDING_MAX, recent: pending.slice(0, RECENT).map((r) => approvalView(r, now)) },
    failures: {
      since: now - FAILURE_WINDOW_MS,
      jobs: failures.results.map((f) => ({
        job_id: f.id,
        tool: f.tool,
        state: f.state,
        exit_code: f.exit_code,
        signal: f.signal,
        subject: f.subject,
        created_at: f.created_at,
        ended_at: f.ended_at,
        error: f.error,
      })),
    },
  });
});
