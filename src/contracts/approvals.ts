/**
 * Human approvals of `ask` decisions: the id a caller retries with, the states an approval goes
 * through, and what the tools and the admin API show of one. Shared by the edge, the CLI and
 * the tests.
 */
import { z } from 'zod';

/** `ap_` + 22 base64url characters (128 random bits). */
export const APPROVAL_ID_PATTERN = /^ap_[A-Za-z0-9_-]{22}$/;
export const ApprovalId = z.string().regex(APPROVAL_ID_PATTERN, 'an approval id looks like "ap_" followed by 22 letters, digits, "_" or "-"');

/**
 * pending → approved → used (the run that consumed it), or pending → denied, or → expired.
 * `expired` is computed from `expires_at`, never stored late: a row past its time is expired.
 */
const APPROVAL_STATUSES = ['pending', 'approved', 'denied', 'used', 'expired'] as const;
export const ApprovalStatus = z.enum(APPROVAL_STATUSES);
export type ApprovalStatus = z.infer<typeof ApprovalStatus>;

/** Who may decide: a team admin (CLI, admin API, dashboard) or the MCP client's own user (elicitation prompt). */
export const ApprovalChannel = z.enum(['admin', 'elicitation']);
export type ApprovalChannel = z.infer<typeof ApprovalChannel>;

/** What a tool's denial carries when approval is required (the caller retries with `id`). */
export const ApprovalInfo = z.object({
  id: z.string(),
  status: ApprovalStatus,
  expires_at: z.string().describe('ISO 8601'),
  reason: z.string().describe('Why the team policy asks for approval'),
  approve_with: z.string().describe('How an admin approves it'),
});
export type ApprovalInfo = z.infer<typeof ApprovalInfo>;

/** One approval as the admin API lists it. */
export const ApprovalView = z.object({
  id: z.string(),
  status: ApprovalStatus,
  channel: ApprovalChannel,
  subject: z.string(),
  tool: z.string(),
  summary: z.string(),
  reason: z.string(),
  created_at: z.string(),
  expires_at: z.string(),
  decided_by: z.string().nullable(),
  decided_at: z.string().nullable(),
  note: z.string().nullable(),
  used_at: z.string().nullable(),
  job_id: z.string().nullable(),
});
export type ApprovalView = z.infer<typeof ApprovalView>;

/** Body of POST /admin/v1/approvals/:id/approve|deny. */
export const ApprovalDecisionBody = z.object({ note: z.string().max(500).optional() }).strict();
