/**
 * Per-task workspaces (docs/workspaces.md): a job may name a `workspace`, its own directory on the
 * agent that holds it, created on first use — empty, cloned from a git URL, or copied from another
 * workspace of the team — with a size quota and an idle time-to-live from the team policy. Without
 * one, a job runs in the agent's shared workspace directory as before.
 */
import { z } from 'zod';

/** What an id may be: it names a directory on the agent, so nothing that could read as a path or an option. */
export const WORKSPACE_ID_RULE = '1-64 characters of lowercase letters, digits, . _ -, starting with a letter or digit';
export const WorkspaceId = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, `workspace id must be ${WORKSPACE_ID_RULE}`);
export type WorkspaceId = z.infer<typeof WorkspaceId>;

/** A git ref to check out after the clone: a branch, tag or commit, never an option. */
const GitRef = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$/, 'ref must be a branch, tag or commit: letters, digits, . _ / -, not starting with -');
/** Where a new workspace's files come from; ignored once it exists. */
export const WorkspaceSource = z.union([
  z
    .object({
      /** Cloned inside the job's sandbox through the agent's egress proxy: the team's network policy decides. */
      git: z
        .string()
        .max(2048)
        .regex(/^https?:\/\/[^\s]+$/, 'git must be an http:// or https:// URL (the clone goes through the egress proxy, which speaks HTTP)'),
      ref: GitRef.optional(),
    })
    .strict(),
  z.object({ copyFrom: WorkspaceId }).strict(),
]);
export type WorkspaceSource = z.infer<typeof WorkspaceSource>;

/** Defaults of the policy's `workspaces` section. */
export const WORKSPACE_DEFAULT_QUOTA_BYTES = 1024 * 1024 * 1024;
export const WORKSPACE_DEFAULT_IDLE_HOURS = 24 * 7;

/** The policy's `workspaces` section. */
export const WorkspacesPolicy = z
  .object({
    /** Bytes one workspace may hold; a job that writes past it fails with `workspace_quota`. */
    quotaBytes: z
      .number()
      .int()
      .min(1024 * 1024)
      .max(1024 ** 4)
      .default(WORKSPACE_DEFAULT_QUOTA_BYTES),
    /** A workspace no job used for this long is deleted by its agent. */
    idleHours: z
      .number()
      .min(0.001)
      .max(24 * 365)
      .default(WORKSPACE_DEFAULT_IDLE_HOURS),
  })
  .strict();
export type WorkspacesPolicy = z.infer<typeof WorkspacesPolicy>;

/** What a job spec carries about its workspace (the edge fills the policy's numbers in). */
export const JobWorkspace = z.object({
  id: WorkspaceId,
  source: WorkspaceSource.optional(),
  quotaBytes: z.number().int().positive(),
  idleMs: z.number().int().positive(),
});
export type JobWorkspace = z.infer<typeof JobWorkspace>;

/** What a job's exit says of its workspace afterwards: the edge keeps it for `workspace_list`. */
export const WorkspaceReport = z.object({ id: WorkspaceId, bytes: z.number().int().min(0) });
export type WorkspaceReport = z.infer<typeof WorkspaceReport>;

/** The capability an agent announces in `hello` when it can run workspace jobs; an agent without it never gets one. */
export const WORKSPACES_CAPABILITY = 'workspaces';

/** One workspace as `workspace_list`, the admin API, the CLI and the dashboard show it. */
export const WorkspaceView = z.object({
  id: WorkspaceId,
  agent_id: z.string(),
  bytes: z.number().int().min(0),
  quota_bytes: z.number().int().min(0),
  created_at: z.number().int(),
  last_used_at: z.number().int(),
  /** When its agent deletes it if no job uses it before. */
  expires_at: z.number().int(),
  agent_connected: z.boolean(),
});
export type WorkspaceView = z.infer<typeof WorkspaceView>;
