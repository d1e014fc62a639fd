/**
 * The admin API's answers as the pages read them. Shapes the edge defines once in src/contracts/ (a job, an agent,
 * an approval, a job's network) are imported from there; the rest lists the fields the pages use.
 */
import type { ApprovalView } from '../../contracts/approvals.ts';
import type { AgentView, JobView } from '../../contracts/job-view.ts';
import type { EgressConnectionView, JobNetworkView } from '../../contracts/network.ts';

export type { AgentView, ApprovalView, JobNetworkView, JobView };

/** A command as the API stores it: an argv array, the audit log's { mode, command, args, runtime }, or a kept start. */
interface StoredCommand {
  mode?: string;
  command?: unknown;
  args?: unknown[];
  runtime?: string;
  truncated?: boolean;
  head?: unknown;
  chars?: number;
  artifactHandle?: string;
}
export type CommandValue = string | unknown[] | StoredCommand | null | undefined;

/** GET /whoami, or GET /teams/<team> for a signed-in person: who the page acts as. */
export interface WhoAmI {
  team: string;
  subject: string;
}

export interface AgentList {
  agents?: AgentView[];
}

/** What a job ran and why it was allowed (its call's audit row): src/admin/job-calls.ts. */
export interface JobCall {
  command: CommandValue;
  cwd: string | null;
  policy: { decision: 'allowed' | 'approved'; reason: string | null; approvalId: string | null };
}

/** A job as the admin API shows it: the view, its call and (on its own page) its network. */
export type AdminJob = JobView & { call: JobCall | null; network?: JobNetworkView };

export interface JobPage {
  jobs?: AdminJob[];
  next_cursor: string | null;
}

/** GET /jobs/<id>/output: live output from a byte offset. */
/** One write of an interactive job (src/contracts/interactive.ts SessionInput). */
export interface SessionInputView {
  seq: number;
  at: number;
  bytes: number;
  eof: boolean;
  stdout_at: number;
  text?: string;
}

export interface LiveOutput {
  /** stdout of an interactive job: its writes so far (the conversation). */
  inputs?: SessionInputView[];
  text: string;
  nextOffset: number;
  offset: number;
  state: string;
  eof: boolean;
  source: string;
  totalBytes: number;
}

/** GET /artifacts/<handle>: a job's stored streams. */
export interface ArtifactInfo {
  jobId: string;
  streams: { stream: string; bytes: number; lines: number; truncated: boolean }[];
}

/** GET /artifacts/<handle>/<stream>?tail=N. */
export interface ArtifactChunk {
  text: string;
  offset: number;
  length: number;
}

/** GET /artifacts/<handle>/search. */
export interface SearchAnswer {
  matchCount: number;
  totalLines: number;
  searchedStreams: string[];
  excerpts: { source: string; lineStart: number; lineEnd: number; content: string }[];
}

export interface ApprovalList {
  approvals?: ApprovalView[];
}

export interface AuditEntry {
  id: number;
  at: number;
  decision: string;
  tool: string;
  subject: string;
  command: CommandValue;
  cwd?: string | null;
  reason?: string | null;
  jobId?: string | null;
  exitStatus?: string | null;
  durationMs?: number | null;
}

export interface AuditPage {
  entries: AuditEntry[];
  nextCursor: string | null;
}

export interface EgressList {
  connections: EgressConnectionView[];
}

/** GET /overview: the team at a glance (src/admin/overview.ts). */
export interface Overview {
  agents: { online: number; total: number; capacity: number; running: number };
  dispatcher?: { queued: number; running: number; lastJob: { endedAt: number; durationMs: number; queueWaitMs: number } | null } | null;
  jobs: { byState?: Record<string, number>; total: number };
  denials: {
    count: number;
    atLeast: boolean;
    recent: { id: number; at: number; tool: string; subject: string; command: CommandValue; cwd: string | null; reason: string | null }[];
  };
  storage?: {
    bytes: number;
    maxBytes: number;
    auditDays: number;
    nextDropAt: number | null;
    exported: { rows: number };
    lastError: string | null;
  } | null;
  approvals: { pending: number; atLeast: boolean; recent: ApprovalView[] };
  failures: {
    jobs: {
      job_id: string;
      tool: string;
      state: string;
      exit_code: number | null;
      signal: string | null;
      subject: string;
      created_at: number;
      error: string | null;
    }[];
  };
}

/** GET /policy. */
export interface CurrentPolicy {
  version: number;
  isDefault?: boolean;
  updatedAt: number | null;
  updatedBy: string | null;
  policy: unknown;
}

export interface PolicyHistory {
  versions?: { version: number; updatedAt: number; updatedBy: string; policy?: unknown }[];
}

/** GET /dashboard/presets.json. */
export interface PolicyPreset {
  name: string;
  title: string;
  description: string;
  policy: unknown;
}

/** POST /policy/check. */
export interface PolicyDecision {
  allowed: boolean;
  decision?: string;
  stage?: string;
  reason?: string;
  notes?: string[];
  policyVersion: number;
}

export interface TokenRecord {
  jti: string;
  subject: string;
  scopes?: string[];
  createdAt: number;
  expiresAt: number;
  revokedAt?: number | null;
  note?: string | null;
  agentGrant?: { sandboxes: string[]; labels: string[]; agentId?: string | null } | null;
  mintedBy?: { kind: string; memberId?: string; role?: string } | null;
  minterEmail?: string | null;
  endsWith?: string | null;
}

/** POST /tokens: the new token, shown once. */
export interface NewToken {
  token: string;
  jti: string;
  subject: string;
  scopes: string[];
  expiresAt: number;
}

/** An MCP client's OAuth grant, as the team's list (admin API) and a person's own list (their page) show it. */
export interface OAuthGrant {
  grantId: string;
  clientId: string;
  clientName?: string | null;
  subject: string;
  scopes: string[];
  createdAt: number;
  lastUsedAt?: number | null;
  expiresAt?: number | null;
  revokedAt?: number | null;
  revokedReason?: string | null;
  state?: string;
}

interface Member {
  memberId: string;
  email?: string | null;
  name?: string | null;
  role: string;
  lastSeenAt?: number | null;
}

export interface Invitation {
  invitationId: string;
  email: string;
  role: string;
  expiresAt: number;
}

export interface MemberList {
  members: Member[];
  invitations: Invitation[];
}

/** GET /dashboard/auth/session: the identity provider's session, if any. */
export interface PersonSession {
  signedIn: boolean;
  signInUrl?: string | null;
  csrf: string;
  email?: string | null;
  subject?: string;
  teams: { team: string; role: string; memberId: string }[];
}
