/**
 * Admin: the team's executor agents and jobs (for the dashboard and the CLI). Same team rules as
 * the MCP tools: another team's job is "not found". Kills are audited.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { JobState } from '../contracts/job-view.ts';
import { jobResult, killJob, listAllAgents, listJobs } from '../dispatch/client.ts';
import { auditAdmin } from './audit-action.ts';
import { apiError } from './http.ts';
import { jobCalls } from './job-calls.ts';
import { jobNetwork } from '../dispatch/team-records-client.ts';

export const agentAdminRoutes = new Hono<AppEnv>();
export const jobAdminRoutes = new Hono<AppEnv>();

agentAdminRoutes.get('/', async (c) => c.json({ agents: await listAllAgents(c.env, c.get('principal').team) }));

const LIST_PARAMS = ['state', 'subject', 'tool', 'cursor', 'limit'];
const JOB_ID = /^[A-Za-z0-9_-]{1,64}$/;

jobAdminRoutes.get('/', async (c) => {
  const q = new URL(c.req.url).searchParams;
  for (const k of q.keys())
    if (!LIST_PARAMS.includes(k)) return apiError(c, 'invalid_argument', `unknown query parameter "${k}"; allowed: ${LIST_PARAMS.join(', ')}`);
  const state = q.get('state');
  if (state !== null && !JobState.safeParse(state).success)
    return apiError(c, 'invalid_argument', `state must be one of ${JobState.options.join(', ')}, got "${state}"`);
  const limit = q.get('limit');
  if (limit !== null && (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > 200))
    return apiError(c, 'invalid_argument', `limit must be an integer from 1 to 200, got "${limit}"`);
  const cursor = q.get('cursor');
  // A job's seq: its creation time in ms × 1024 (job-rows.ts), 16 digits today; an integer JavaScript holds exactly.
  if (cursor !== null && !(/^\d{1,16}$/.test(cursor) && Number(cursor) <= Number.MAX_SAFE_INTEGER))
    return apiError(c, 'invalid_argument', 'cursor is not valid; pass the next_cursor of a previous page');
  const team = c.get('principal').team;
  const page = await listJobs(c.env, team, {
    state: (state ?? undefined) as JobState | undefined,
    subject: q.get('subject') ?? undefined,
    tool: q.get('tool') ?? undefined,
    cursor: cursor ?? undefined,
    limit: limit === null ? 50 : Number(limit),
  });
  // What each job ran (command, cwd) and the policy's verdict, from its call's audit row.
  const calls = await jobCalls(
    c.env,
    team,
    page.jobs.map((j) => j.job_id),
  );
  return c.json({ ...page, jobs: page.jobs.map((j) => ({ ...j, call: calls.get(j.job_id) ?? null })) });
});

jobAdminRoutes.get('/:id', async (c) => {
  const id = c.req.param('id');
  if (!JOB_ID.test(id)) return apiError(c, 'invalid_argument', `malformed job id "${id.slice(0, 60)}"`);
  const include = c.req.query('include');
  if (include !== undefined && include !== 'result') return apiError(c, 'invalid_argument', `include must be "result", got "${include.slice(0, 40)}"`);
  const r = await jobResult(c.env, c.get('principal').team, id);
  if (!r) return apiError(c, 'not_found', `job "${id}" not found`);
  const team = c.get('principal').team;
  // What ran (its call's audit row) and the network connections its egress proxy reported.
  const [calls, network] = await Promise.all([jobCalls(c.env, team, [id]), jobNetwork(c.env, team, id)]);
  const job = { ...r.view, call: calls.get(id) ?? null, network };
  // include=result: the stored exit with its inline output, as the caller got it (may be MiBs).
  return c.json(include === 'result' ? { job, result: r.exit } : { job });
});

jobAdminRoutes.post('/:id/kill', async (c) => {
  const p = c.get('principal');
  const id = c.req.param('id');
  if (!JOB_ID.test(id)) return apiError(c, 'invalid_argument', `malformed job id "${id.slice(0, 60)}"`);
  const reason = `killed by ${p.subject} (admin API)`;
  const r = await killJob(c.env, p.team, id, reason);
  await auditAdmin(c, 'admin.job_kill', { command: { job_id: id }, jobId: id, ok: r.found, reason: r.found ? `state ${r.state}` : 'not_found' });
  if (!r.found) return apiError(c, 'not_found', `job "${id}" not found`);
  return c.json({ job_id: id, state: r.state });
});
