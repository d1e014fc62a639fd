/**
 * Admin: the team at a glance, for the dashboard's landing page — agents online and their slots,
 * the last hour's jobs by state, denials, pending approvals and the most recent failed jobs.
 * `GET /admin/v1/overview`. Everything comes from the team's Durable Object (its jobs, its audit
 * log, its agents and queue); every read is bounded, whatever the team's history holds.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { dispatchHealth, listAllAgents, teamOverview } from '../dispatch/client.ts';
import { approvalView } from '../approval/record.ts';
import { listApprovals } from '../dispatch/team-records-client.ts';

export const overviewRoutes = new Hono<AppEnv>();

const OVERVIEW_WINDOW_MS = 3600_000;
/** Failed jobs are looked for this far back (a morning look at the night's failures). */
const FAILURE_WINDOW_MS = 24 * 3600_000;
const PENDING_MAX = 200;
const RECENT = 5;
const FAILURES = 8;

overviewRoutes.get('/', async (c) => {
  const team = c.get('principal').team;
  const now = Date.now();
  const since = now - OVERVIEW_WINDOW_MS;
  const [agents, health, figures, pending] = await Promise.all([
    listAllAgents(c.env, team),
    dispatchHealth(c.env, team),
    teamOverview(c.env, team, { since, recent: RECENT, failuresSince: now - FAILURE_WINDOW_MS, failures: FAILURES }),
    listApprovals(c.env, team, { status: 'pending', limit: PENDING_MAX, now }),
  ]);
  const online = agents.filter((a) => a.state === 'connected');
  return c.json({
    now,
    since,
    agents: {
      online: online.length,
      total: agents.length,
      capacity: online.reduce((n, a) => n + a.capacity, 0),
      running: online.reduce((n, a) => n + a.running, 0),
    },
    // The team's Durable Object's own counters, live.
    dispatcher: health,
    jobs: { byState: figures.jobsByState, total: Object.values(figures.jobsByState).reduce((n, k) => n + k, 0) },
    denials: {
      count: figures.denials.denied,
      // Counted over every row of the window (the team's own log): never a lower bound.
      atLeast: false,
      recent: figures.denials.recent.map((d) => ({ id: d.id, at: d.at, tool: d.tool, subject: d.subject, command: d.command, cwd: d.cwd, reason: d.reason })),
    },
    storage: figures.storage,
    approvals: { pending: pending.length, atLeast: pending.length >= PENDING_MAX, recent: pending.slice(0, RECENT).map((r) => approvalView(r, now)) },
    failures: {
      since: now - FAILURE_WINDOW_MS,
      jobs: figures.failures.map((f) => ({
        job_id: f.job_id,
        tool: f.tool,
        state: f.state,
        exit_code: f.exit_code,
        signal: f.signal,
        subject: f.subject,
        created_at: f.created_at,
        ended_at: f.ended_at,
        error: f.error?.message ?? null,
      })),
    },
  });
});
