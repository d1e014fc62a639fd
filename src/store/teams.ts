/**
 * The directory's teams (D1 `teams`, migrations/0001_init.sql and 0016_team_lifecycle.sql): each team's
 * status, who created it, its quotas — and, for an operator's delete, every row any table keeps of it.
 * A team made implicitly (by a token or member insert) has a row with status `active` and no creator.
 */
import { z } from 'zod';
import type { Env } from '../env.ts';

/** The team id rule, the same as the `team` claim of a token (src/auth/verify.ts): what a DO is named by and a key prefixed with. */
export const TEAM_ID_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const TEAM_ID_RULE = 'a lowercase letter or digit, then up to 62 lowercase letters, digits, "-" or "_"';

export const TeamId = z.string().regex(TEAM_ID_RE, `a team id is ${TEAM_ID_RULE}`);

/** What a team may use; absent: no limit. Enforced by the team's object (src/dispatch/quotas.ts). */
export const Quotas = z
  .object({
    /** Jobs a day (UTC) the team may submit; one more is refused with `quota_exceeded`. */
    jobsPerDay: z.number().int().min(0).max(10_000_000).optional(),
    /** Bytes the team's object may hold (its SQLite database); over it, new jobs are refused. */
    storageBytes: z
      .number()
      .int()
      .min(0)
      .max(10 * 1024 ** 3)
      .optional(),
  })
  .strict();
export type Quotas = z.infer<typeof Quotas>;

export type TeamStatus = 'active' | 'suspended';

export interface TeamRecord {
  id: string;
  status: TeamStatus;
  createdAt: number;
  /** The operator (token subject) who created it; null: made implicitly by a token or member insert. */
  createdBy: string | null;
  note: string | null;
  suspended: { at: number; by: string; reason: string } | null;
  quotas: Quotas;
}

interface DbTeam {
  id: string;
  status: string;
  created_at: number;
  created_by: string | null;
  note: string | null;
  suspended_at: number | null;
  suspended_by: string | null;
  suspend_reason: string | null;
  quotas: string | null;
}

function quotasOf(json: string | null): Quotas {
  if (json === null) return {};
  try {
    const q = Quotas.safeParse(JSON.parse(json));
    return q.success ? q.data : {};
  } catch {
    return {};
  }
}

const toRecord = (r: DbTeam): TeamRecord => ({
  id: r.id,
  status: r.status === 'suspended' ? 'suspended' : 'active',
  createdAt: r.created_at,
  createdBy: r.created_by,
  note: r.note,
  suspended: r.status === 'suspended' ? { at: r.suspended_at ?? 0, by: r.suspended_by ?? '', reason: r.suspend_reason ?? '' } : null,
  quotas: quotasOf(r.quotas),
});

/** Creates the team's row; null when one exists already (made by an operator or implicitly). */
export async function createTeam(env: Env, t: { id: string; note: string | null; quotas: Quotas; by: string; now: number }): Promise<TeamRecord | null> {
  const row = await env.DB.prepare(
    `INSERT INTO teams (id, created_at, status, created_by, note, quotas) VALUES (?, ?, 'active', ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING *`,
  )
    .bind(t.id, t.now, t.by, t.note, Object.keys(t.quotas).length ? JSON.stringify(t.quotas) : null)
    .first<DbTeam>();
  return row ? toRecord(row) : null;
}

export async function getTeam(env: Env, id: string): Promise<TeamRecord | null> {
  const row = await env.DB.prepare(`SELECT * FROM teams WHERE id = ?`).bind(id).first<DbTeam>();
  return row ? toRecord(row) : null;
}

/** Teams in id order, after `after` (the page's cursor), optionally of one status. */
export async function listTeams(env: Env, f: { after?: string; status?: TeamStatus; limit: number }): Promise<{ teams: TeamRecord[]; next: string | null }> {
  const rows = await env.DB.prepare(`SELECT * FROM teams WHERE id > ?1 AND (?2 IS NULL OR status = ?2) ORDER BY id LIMIT ?3`)
    .bind(f.after ?? '', f.status ?? null, f.limit + 1)
    .all<DbTeam>();
  const page = rows.results.slice(0, f.limit).map(toRecord);
  return { teams: page, next: rows.results.length > f.limit ? page[page.length - 1].id : null };
}

/** Records a suspension (or, with null, the resumption); false when the team has no row. */
export async function setTeamStatus(env: Env, id: string, s: { at: number; by: string; reason: string } | null): Promise<boolean> {
  const r = s
    ? await env.DB.prepare(`UPDATE teams SET status = 'suspended', suspended_at = ?, suspended_by = ?, suspend_reason = ? WHERE id = ?`)
        .bind(s.at, s.by, s.reason, id)
        .run()
    : await env.DB.prepare(`UPDATE teams SET status = 'active', suspended_at = NULL, suspended_by = NULL, suspend_reason = NULL WHERE id = ?`).bind(id).run();
  return r.meta.changes > 0;
}

export async function setTeamQuotas(env: Env, id: string, q: Quotas): Promise<boolean> {
  const r = await env.DB.prepare(`UPDATE teams SET quotas = ? WHERE id = ?`)
    .bind(Object.keys(q).length ? JSON.stringify(q) : null, id)
    .run();
  return r.meta.changes > 0;
}

/**
 * Every D1 table with a `team` column (test/operator/teams-store.test.ts checks this list against
 * migrations/): what a team's delete exports and then removes, with the `teams` row itself.
 */
export const TEAM_TABLES = [
  'tokens',
  'revocations',
  'members',
  'member_invitations',
  'oauth_grants',
  'oauth_blocked_clients',
  'policies',
  'policy_versions',
  // Tables an older deployment wrote per call (their data now lives in the team's object); rows may remain.
  'agents',
  'jobs',
  'artifacts',
  'audit',
  'approvals',
  'tasks',
  'egress_connections',
  'egress_jobs',
] as const;

/** The team's rows in every directory table, for the export a delete writes first. */
export async function teamRows(env: Env, id: string): Promise<Record<string, Record<string, unknown>[]>> {
  const results = await env.DB.batch([
    env.DB.prepare(`SELECT * FROM teams WHERE id = ?`).bind(id),
    ...TEAM_TABLES.map((t) => env.DB.prepare(`SELECT * FROM ${t} WHERE team = ?`).bind(id)),
  ]);
  const out: Record<string, Record<string, unknown>[]> = {};
  ['teams', ...TEAM_TABLES].forEach((t, i) => {
    out[t] = results[i].results as Record<string, unknown>[];
  });
  return out;
}

/** Removes every row naming the team, in one batch (one transaction); returns the rows removed per table. */
export async function deleteTeamRows(env: Env, id: string): Promise<Record<string, number>> {
  const results = await env.DB.batch([
    ...TEAM_TABLES.map((t) => env.DB.prepare(`DELETE FROM ${t} WHERE team = ?`).bind(id)),
    env.DB.prepare(`DELETE FROM teams WHERE id = ?`).bind(id),
  ]);
  const out: Record<string, number> = {};
  [...TEAM_TABLES, 'teams'].forEach((t, i) => {
    out[t] = results[i].meta.changes;
  });
  return out;
}

/** Every R2 key of a team starts with this (artifact bodies and their search indexes: artifacts.ts; audit exports: audit-export.ts). */
const teamKeyPrefix = (team: string): string => `t/${team}/`;

/** Where a deleted team's export is kept: outside its prefix, so the delete that wrote it leaves it. */
export const teamExportPrefix = (team: string, at: number): string => `exports/teams/${team}/${new Date(at).toISOString().replace(/[:.]/g, '-')}/`;

/** R2 lists and deletes at most 1,000 keys a call. */
const R2_KEYS_PER_CALL = 1000;

/**
 * Deletes the team's R2 objects, a listed page (≤ 1,000 keys) per delete call, for at most `rounds`
 * pages (two subrequests each): `done` false when keys remain for another call.
 */
export async function deleteTeamObjects(env: Env, team: string, rounds: number): Promise<{ deleted: number; done: boolean }> {
  let deleted = 0;
  for (let i = 0; i < rounds; i++) {
    const page = await env.ARTIFACTS.list({ prefix: teamKeyPrefix(team), limit: R2_KEYS_PER_CALL });
    if (!page.objects.length) return { deleted, done: true };
    await env.ARTIFACTS.delete(page.objects.map((o) => o.key));
    deleted += page.objects.length;
    if (!page.truncated) return { deleted, done: true };
  }
  return { deleted, done: false };
}

/** Stores the team's directory rows (JSON) as the first half of its export. */
export async function putDirectoryExport(env: Env, key: string, doc: unknown): Promise<{ key: string; bytes: number }> {
  const body = new TextEncoder().encode(JSON.stringify(doc));
  await env.ARTIFACTS.put(key, body, { httpMetadata: { contentType: 'application/json' } });
  return { key, bytes: body.byteLength };
}
