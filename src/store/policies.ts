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

/** Stores `policy` (already validated) as the team's next version. */
export async function putTeamPolicy(env: Env, team: string, policy: PolicyDocument, by: string, now = Date.now()): Promise<{ version: number }> {
  const row = await env.DB.prepare(
    `INSERT INTO policies (team, version, document, updated_by, updated_at) VALUES (?1, 1, ?2, ?3, ?4)
     ON CONFLICT (team) DO UPDATE SET version = policies.version + 1, document = excluded.document,
       updated_by = excluded.updated_by, updated_at = excluded.updated_at
     RETURNING version`,
  ).bind(team, JSON.stringify(policy), by, now).first<{ version: number }>();
  return { version: row!.version };
}
