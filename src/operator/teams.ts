/**
 * A team's life cycle, for the deployment's operators (docs/teams.md): create, list, show, suspend,
 * resume, set quotas, read usage, delete. The directory row (src/store/teams.ts) records the status;
 * the team's object (src/dispatch/team-dispatcher.ts) enforces it, so it is told first: a suspension is in
 * effect when the call answers, and one the object did not take changes nothing.
 */
import type { Context } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import { describeIssues } from '../contracts/errors.ts';
import { apiError, readJson } from '../admin/http.ts';
import { suspendTeam } from '../dispatch/admission-client.ts';
import { teamStub } from '../dispatch/client.ts';
import { forgetGrants } from '../oauth/grants.ts';
import {
  createTeam,
  deleteTeamObjects,
  deleteTeamRows,
  getTeam,
  listTeams,
  putDirectoryExport,
  Quotas,
  setTeamQuotas,
  setTeamStatus,
  TEAM_ID_RE,
  TEAM_ID_RULE,
  TeamId,
  teamExportPrefix,
  teamRows,
  type TeamRecord,
} from '../store/teams.ts';

type C = Context<AppEnv>;

/** R2 list+delete rounds one delete call makes (two subrequests each): 20,000 objects; more take another call. */
const R2_ROUNDS_PER_CALL = 20;
const LIST_MAX = 500;

const CreateBody = z.object({ id: TeamId, note: z.string().max(500).optional(), quotas: Quotas.optional() }).strict();
const SuspendBody = z.object({ reason: z.string().trim().min(1, 'say why (reason)').max(500) }).strict();

/** The operator, as the directory and the team's object record them. */
const operatorOf = (c: C) => `operator:${c.get('principal').subject}`;

async function body<T>(c: C, schema: z.ZodType<T>): Promise<{ ok: true; value: T } | { ok: false; response: Response }> {
  const b = await readJson(c);
  if (!b.ok) return b;
  const parsed = schema.safeParse(b.value);
  if (!parsed.success) return { ok: false, response: apiError(c, 'invalid_argument', describeIssues(parsed.error.issues)) };
  return { ok: true, value: parsed.data };
}

/** The `:id` of the path, when it is a team id at all. */
function idOf(c: C): { ok: true; id: string } | { ok: false; response: Response } {
  const id = c.req.param('id') ?? '';
  if (!TEAM_ID_RE.test(id))
    return { ok: false, response: apiError(c, 'invalid_argument', `"${id.slice(0, 100)}" is not a team id: a team id is ${TEAM_ID_RULE}`) };
  return { ok: true, id };
}

async function teamOr404(c: C): Promise<{ ok: true; team: TeamRecord } | { ok: false; response: Response }> {
  const id = idOf(c);
  if (!id.ok) return id;
  const team = await getTeam(c.env, id.id);
  if (!team) return { ok: false, response: apiError(c, 'not_found', `team "${id.id}" not found (gatehouse team list shows the teams)`) };
  return { ok: true, team };
}

/** The team's object did not answer: nothing was changed in the directory. */
const objectFailed = (c: C, team: string, what: string, e: unknown) =>
  apiError(c, 'upstream_error', `team "${team}"'s object did not ${what} (${(e as Error)?.message ?? String(e)}); nothing changed: try again`);

export async function createTeamRoute(c: C): Promise<Response> {
  const b = await body(c, CreateBody);
  if (!b.ok) return b.response;
  const { id, note, quotas = {} } = b.value;
  const existing = await getTeam(c.env, id);
  if (existing) return apiError(c, 'conflict', `team "${id}" exists (status ${existing.status}, created ${new Date(existing.createdAt).toISOString()})`, 409);
  const stub = teamStub(c.env, id);
  try {
    const deleted = await stub.deletedAt();
    if (deleted)
      return apiError(c, 'conflict', `team "${id}" was deleted (${new Date(deleted.at).toISOString()}, by ${deleted.by}); a team id is never used again`, 409);
    if (Object.keys(quotas).length) await stub.setQuotas(quotas);
  } catch (e) {
    return objectFailed(c, id, 'answer', e);
  }
  const team = await createTeam(c.env, { id, note: note ?? null, quotas, by: operatorOf(c), now: Date.now() });
  if (!team) return apiError(c, 'conflict', `team "${id}" exists`, 409);
  console.info({ operator: c.get('principal').subject, action: 'team.create', team: id });
  return c.json({ team }, 201);
}

export async function listTeamsRoute(c: C): Promise<Response> {
  const status = c.req.query('status');
  if (status !== undefined && status !== 'active' && status !== 'suspended')
    return apiError(c, 'invalid_argument', `status "${status.slice(0, 40)}": active or suspended`);
  const limit = Number(c.req.query('limit') ?? 100);
  if (!Number.isInteger(limit) || limit < 1 || limit > LIST_MAX) return apiError(c, 'invalid_argument', `limit must be an integer from 1 to ${LIST_MAX}`);
  // Status and directory facts only: usage would wake every team's object (see one team: GET /operator/v1/teams/:id).
  return c.json(await listTeams(c.env, { after: c.req.query('after'), status, limit }));
}

export async function showTeamRoute(c: C): Promise<Response> {
  const t = await teamOr404(c);
  if (!t.ok) return t.response;
  try {
    return c.json({ team: t.team, usage: await teamStub(c.env, t.team.id).teamUsage() });
  } catch (e) {
    return c.json({ team: t.team, usage: null, usageError: (e as Error)?.message ?? String(e) });
  }
}

export async function teamUsageRoute(c: C): Promise<Response> {
  const t = await teamOr404(c);
  if (!t.ok) return t.response;
  try {
    return c.json({ team: t.team.id, usage: await teamStub(c.env, t.team.id).teamUsage() });
  } catch (e) {
    return objectFailed(c, t.team.id, 'answer', e);
  }
}

export async function suspendTeamRoute(c: C): Promise<Response> {
  const t = await teamOr404(c);
  if (!t.ok) return t.response;
  const b = await body(c, SuspendBody);
  if (!b.ok) return b.response;
  const team = t.team.id;
  if (t.team.suspended)
    return apiError(
      c,
      'conflict',
      `team "${team}" is suspended already (since ${new Date(t.team.suspended.at).toISOString()}: ${t.team.suspended.reason})`,
      409,
    );
  const s = { at: Date.now(), by: operatorOf(c), reason: b.value.reason };
  try {
    await suspendTeam(c.env, team, s);
  } catch (e) {
    return objectFailed(c, team, 'take the suspension', e);
  }
  await setTeamStatus(c.env, team, s);
  console.info({ operator: c.get('principal').subject, action: 'team.suspend', team });
  return c.json({ team: { ...t.team, status: 'suspended', suspended: s } });
}

export async function resumeTeamRoute(c: C): Promise<Response> {
  const t = await teamOr404(c);
  if (!t.ok) return t.response;
  const team = t.team.id;
  if (!t.team.suspended) return apiError(c, 'conflict', `team "${team}" is not suspended`, 409);
  try {
    await suspendTeam(c.env, team, null);
  } catch (e) {
    return objectFailed(c, team, 'take the resumption', e);
  }
  await setTeamStatus(c.env, team, null);
  console.info({ operator: c.get('principal').subject, action: 'team.resume', team });
  return c.json({ team: { ...t.team, status: 'active', suspended: null } });
}

export async function setQuotasRoute(c: C): Promise<Response> {
  const t = await teamOr404(c);
  if (!t.ok) return t.response;
  const b = await body(c, Quotas);
  if (!b.ok) return b.response;
  try {
    await teamStub(c.env, t.team.id).setQuotas(b.value);
  } catch (e) {
    return objectFailed(c, t.team.id, 'take the quotas', e);
  }
  await setTeamQuotas(c.env, t.team.id, b.value);
  console.info({ operator: c.get('principal').subject, action: 'team.quotas', team: t.team.id });
  return c.json({ team: { ...t.team, quotas: b.value } });
}

/**
 * Deletes a suspended team: its export first (the directory's rows and everything its object keeps, to
 * R2 under exports/teams/<id>/), then its object's storage, its R2 objects, its OAuth grants in the
 * authorization server, and its directory rows. A team with more R2 objects than one call deletes
 * answers 202: the same call again goes on (the export and the object's erasure are not repeated).
 */
export async function deleteTeamRoute(c: C): Promise<Response> {
  const t = await teamOr404(c);
  if (!t.ok) return t.response;
  const team = t.team.id;
  if (c.req.query('confirm') !== team) return apiError(c, 'invalid_argument', `deleting a team needs ?confirm=${team} (its id again)`);
  if (!t.team.suspended)
    return apiError(c, 'conflict', `team "${team}" is active: suspend it first (POST /operator/v1/teams/${team}/suspend), then delete it`, 409);
  const stub = teamStub(c.env, team);
  const at = Date.now();
  const by = operatorOf(c);
  let exported: Record<string, unknown> | null = null;
  let agentsDisconnected = 0;
  try {
    if (!(await stub.deletedAt())) {
      const prefix = teamExportPrefix(team, at);
      const directory = await putDirectoryExport(c.env, `${prefix}directory.json`, { team, at, by, rows: await teamRows(c.env, team) });
      const object = await stub.exportTeamData(`${prefix}object.ndjson`, { kind: 'gatehouse-team-export', team, at, by });
      exported = { directory, object: { key: object.key, bytes: object.bytes, rows: object.rows } };
      agentsDisconnected = (await stub.deleteTeamData({ at, by })).agentsDisconnected;
    }
  } catch (e) {
    return apiError(
      c,
      'upstream_error',
      `team "${team}" could not be exported or its object erased (${(e as Error)?.message ?? String(e)}); nothing is deleted yet: try again`,
    );
  }
  const r2 = await deleteTeamObjects(c.env, team, R2_ROUNDS_PER_CALL);
  if (!r2.done) {
    return c.json(
      { team, complete: false, export: exported, r2Deleted: r2.deleted, message: `more of team "${team}"'s R2 objects remain: send the same DELETE again` },
      202,
    );
  }
  const grants = ((await teamRows(c.env, team)).oauth_grants ?? []).map((g) => ({ grantId: String(g.grant_id), userId: String(g.user_id) }));
  const forgotten = await forgetGrants(c.req.raw, c.env, grants);
  const rows = await deleteTeamRows(c.env, team);
  console.info({ operator: c.get('principal').subject, action: 'team.delete', team });
  return c.json({
    team,
    complete: true,
    export: exported,
    agentsDisconnected,
    r2Deleted: r2.deleted,
    oauthGrantsForgotten: forgotten.forgotten,
    rowsDeleted: rows,
  });
}
