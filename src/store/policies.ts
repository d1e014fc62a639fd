/**
 * Team policies (D1): one current document per team with a version counter. A team without a
 * stored policy gets DEFAULT_POLICY (version 0, isDefault). Stored documents are re-validated on
 * read so a schema change never feeds an unchecked document to the engine.
 */
import type { Env } from '../env.ts';
import { PolicyDocument } from '../contracts/policy.ts';
import { DEFAULT_POLICY } from '../policy/default-policy.ts';

export interface TeamPolicy {
  policy: PolicyDocument;
  version: number;
  updatedAt: number | null;
  updatedBy: string | null;
  isDefault: boolean;
}

interface PolicyRow {
  version: number;
  document: string;
  updated_by: string;
  updated_at: number;
}

export async function getTeamPolicy(env: Env, team: string): Promise<TeamPolicy> {
  const row = await env.DB.prepare('SELECT version, document, updated_by, updated_at FROM policies WHERE team = ?').bind(team).first<PolicyRow>();
  if (!row) return { policy: DEFAULT_POLICY, version: 0, updatedAt: null, updatedBy: null, isDefault: true };
  let doc: unknown;
  try {
    doc = JSON.parse(row.document);
  } catch {
    doc = undefined;
  }
  const parsed = PolicyDocument.safeParse(doc);
  if (!parsed.success) {
    // Fail closed on a corrupt row: deny-everything beats silently running the default.
    throw new Error(`stored policy of team "${team}" (version ${row.version}) is invalid; set it again with PUT /admin/v1/policy`);
  }
  return { policy: parsed.data, version: row.version, updatedAt: row.updated_at, updatedBy: row.updated_by, isDefault: false };
}

/** Stores `policy` (already validated) as the team's next version, and keeps that version in the history. */
export async function putTeamPolicy(
  env: Env,
  team: string,
  policy: PolicyDocument,
  by: string,
  now = Date.now(),
): Promise<{ version: number; updatedAt: number }> {
  // One batch is one transaction: the history row is exactly the version just written.
  const [upsert] = await env.DB.batch<{ version: number }>([
    env.DB.prepare(
      `INSERT INTO policies (team, version, document, updated_by, updated_at) VALUES (?1, 1, ?2, ?3, ?4)
       ON CONFLICT (team) DO UPDATE SET version = policies.version + 1, document = excluded.document,
         updated_by = excluded.updated_by, updated_at = excluded.updated_at
       RETURNING version`,
    ).bind(team, JSON.stringify(policy), by, now),
    env.DB.prepare(
      `INSERT INTO policy_versions (team, version, document, updated_by, updated_at)
       SELECT team, version, document, updated_by, updated_at FROM policies WHERE team = ?1`,
    ).bind(team),
  ]);
  return { version: upsert.results[0].version, updatedAt: now };
}

export interface PolicyVersion {
  version: number;
  updatedAt: number;
  updatedBy: string;
  /** The document as saved (null if it no longer parses under today's schema). */
  policy: PolicyDocument | null;
}

export const POLICY_HISTORY_MAX_LIMIT = 100;

/** Saved versions of the team's policy, newest first, at most `limit`, older than `before` when given. */
export async function listPolicyVersions(env: Env, team: string, limit: number, before?: number): Promise<PolicyVersion[]> {
  const r = await env.DB.prepare(
    `SELECT version, document, updated_by, updated_at FROM policy_versions
     WHERE team = ? AND version < ? ORDER BY version DESC LIMIT ?`,
  )
    .bind(team, before ?? Number.MAX_SAFE_INTEGER, Math.min(Math.max(1, limit), POLICY_HISTORY_MAX_LIMIT))
    .all<PolicyRow>();
  return r.results.map((row) => {
    let doc: unknown;
    try {
      doc = JSON.parse(row.document);
    } catch {
      doc = undefined;
    }
    const parsed = PolicyDocument.safeParse(doc);
    return { version: row.version, updatedAt: row.updated_at, updatedBy: row.updated_by, policy: parsed.success ? parsed.data : null };
  });
}
