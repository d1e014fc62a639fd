/**
 * The team's script library: named, versioned scripts that `run_script {"name": …}` runs. Shared by
 * the team's object (which stores them), the admin API, the CLI, the dashboard and the tool.
 */
import { z } from 'zod';
import { SQLITE_ROW_MAX_BYTES } from '../platform/limits.ts';

/** A script's source: the run_script code cap (src/script/limits.ts CODE_MAX_BYTES), far below a DO row (2 MB). */
export const SCRIPT_SOURCE_MAX_BYTES = 51_200;
/**
 * Scripts one team keeps, and versions one script keeps. Sized so the whole library stays small beside
 * the team's object's 10 GB (200 × 50 × 51,200 bytes ≈ 512 MB at the very most) and one version is one
 * row well under Cloudflare's 2 MB row limit (SQLITE_ROW_MAX_BYTES, src/platform/limits.ts).
 */
export const SCRIPTS_PER_TEAM_MAX = 200;
export const VERSIONS_PER_SCRIPT_MAX = 50;
/** What a listing or the dashboard asks at once. */
export const SCRIPT_LIST_MAX = SCRIPTS_PER_TEAM_MAX;

// A version row holds the source plus a few short columns: it must fit a row.
if (SCRIPT_SOURCE_MAX_BYTES * 2 > SQLITE_ROW_MAX_BYTES) throw new Error('a script version must fit one Durable Object row');

/** Names are what a client types and a file in `.gatehouse/scripts/` is called: lower-case, digits, `-`, `_`. */
export const SCRIPT_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;
export const SCRIPT_NAME_RULE = '1–64 characters: lower-case letters, digits, "-" and "_", starting with a letter or digit';
export const ScriptName = z.string().regex(SCRIPT_NAME_PATTERN, `a script name is ${SCRIPT_NAME_RULE}`);

/** `vars` a caller passes to a script: names a JavaScript identifier can spell, values JSON, bounded. */
export const VAR_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export const VARS_MAX_COUNT = 64;
export const VARS_MAX_BYTES = 64 * 1024;
export const VARS_RULE = `at most ${VARS_MAX_COUNT} vars, names of 1–64 letters, digits and "_" (not starting with a digit), values any JSON, ${VARS_MAX_BYTES} bytes in all as JSON`;

/** Why `vars` is refused, or null: one message naming the bad key and what is allowed. */
export function varsProblem(vars: Record<string, unknown>): string | null {
  const keys = Object.keys(vars);
  if (keys.length > VARS_MAX_COUNT) return `vars has ${keys.length} entries; ${VARS_RULE}`;
  for (const k of keys) if (!VAR_NAME_PATTERN.test(k)) return `vars name ${JSON.stringify(k.slice(0, 80))} is not allowed; ${VARS_RULE}`;
  let json: string | undefined;
  try {
    json = JSON.stringify(vars);
  } catch {
    return `vars must be JSON values; ${VARS_RULE}`;
  }
  const bytes = new TextEncoder().encode(json ?? '').byteLength;
  if (bytes > VARS_MAX_BYTES) return `vars is ${bytes} bytes as JSON; ${VARS_RULE}`;
  return null;
}

export const ScriptVars = z.record(z.string(), z.unknown()).superRefine((v, ctx) => {
  const p = varsProblem(v);
  if (p) ctx.addIssue({ code: 'custom', message: p });
});

/** The admin API's push body. */
export const ScriptPush = z.strictObject({
  name: ScriptName,
  source: z.string().min(1, 'source is empty'),
});
export type ScriptPush = z.infer<typeof ScriptPush>;

/** One version as listings show it (no source). */
export const ScriptVersionView = z.object({
  name: z.string(),
  version: z.number().int(),
  bytes: z.number().int(),
  sha256: z.string(),
  createdAt: z.number(),
  createdBy: z.string(),
});
export type ScriptVersionView = z.infer<typeof ScriptVersionView>;

/** One script in the team's listing: its newest version and how many it keeps. */
export const ScriptSummary = ScriptVersionView.extend({ versions: z.number().int() });
export type ScriptSummary = z.infer<typeof ScriptSummary>;

/** One version with its source (`show`, and what run_script runs). */
export const ScriptSource = ScriptVersionView.extend({ source: z.string() });
export type ScriptSource = z.infer<typeof ScriptSource>;

/** Which script ran (a run's result and its audit row): library or workspace, version, digest of the source. */
export const ScriptRef = z.object({
  name: z.string(),
  origin: z.enum(['team', 'workspace']),
  /** The library's version; absent for a workspace file. */
  version: z.number().int().optional(),
  sha256: z.string(),
});
export type ScriptRef = z.infer<typeof ScriptRef>;

/** A script's digest: SHA-256 of its UTF-8 source, lower-case hex (the same at the edge, in the CLI and in the audit log). */
export async function scriptDigest(source: string): Promise<string> {
  const d = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(source));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, '0')).join('');
}
