/**
 * What happens to a call the policy answered with `ask`. In order:
 *
 * 1. The call comes back from an approval prompt (2026-07-28 `input_required` retry with the
 *    signed request state): approve → run; decline, cancel or an expired prompt → denied.
 *    A prompt counts once: replaying its state with a new answer is refused.
 * 2. The call carries an approval id (an admin approved it with the CLI, the admin API or the
 *    dashboard): use it once, for this subject and this exact request only.
 * 3. A 2026-era client that declared form elicitation gets an `input_required` result asking
 *    its user to approve (unless the policy says `approvals.askClient: false`). (2025-era clients cannot be asked on this stateless endpoint: the
 *    server cannot send them a request and receive the answer.)
 * 4. Anyone else gets `approval_required` with a pending approval id and how to get it approved.
 *
 * A script's subprocess cannot wait for a person: it is refused and told to use execute.
 */
import { CLIENT_CAPABILITIES_META_KEY, inputRequired, inputResponse, type InputRequiredResult, type ServerContext } from '@modelcontextprotocol/server';
import type { Env } from '../env.ts';
import type { Principal } from '../auth/principal.ts';
import type { ApprovalInfo } from '../contracts/approvals.ts';
import type { PolicyDocument } from '../contracts/policy.ts';
import { ruleNumber, type PolicyDecision } from '../policy/engine.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { mintPromptState, stateSecret, type VerifiedPromptState } from './prompt-state.ts';
import { requestHash, requestSummary, type ApprovableRequest } from './request.ts';
import { iso, type ApprovalRefusalCode } from './record.ts';
import { answerPrompt, consumeApproval, openApproval } from '../dispatch/team-records-client.ts';

/** The key of the approval question inside `inputRequests` / `inputResponses`. */
const PROMPT_KEY = 'approval';

/** The form the client's user answers: one yes/no. */
const PROMPT_SCHEMA = {
  type: 'object' as const,
  properties: {
    approve: { type: 'boolean' as const, title: 'Approve this run', description: 'true runs the command once; false refuses it' },
  },
  required: ['approve'],
};

export type Refusal = { code: ApprovalRefusalCode | 'approval_required'; message: string; approvalId?: string; approval?: ApprovalInfo; asked?: boolean };

export type GateResult =
  | { kind: 'proceed'; approvalId: string; note: string }
  | { kind: 'prompt'; result: InputRequiredResult; approvalId: string }
  | { kind: 'refused'; refusal: Refusal };

export interface GateInput {
  request: ApprovableRequest;
  decision: PolicyDecision & { ask: NonNullable<PolicyDecision['ask']> };
  policy: PolicyDocument;
  approvalId?: string;
  /** The id the job will have, so the approval row links to its run. */
  jobId: string;
}

/**
 * What the gate reads of the call (the governed path passes its call context): the bindings, the
 * caller, and the protocol era, since only a 2026-era client can be prompted.
 */
export interface GateCall {
  env: Env;
  principal: Principal;
  era: 'legacy' | 'modern';
}

export async function approvalGate(ctx: GateCall, extra: ServerContext, g: GateInput): Promise<GateResult> {
  const { env, principal: p } = ctx;
  const now = Date.now();
  const askReason = g.decision.ask.reason;
  const hash = await requestHash(g.request);

  const state = ctx.era === 'modern' ? extra.mcpReq.requestState<VerifiedPromptState>() : undefined;
  if (state) return answerFromPrompt(ctx, extra, g, state, hash, now);

  if (g.approvalId) {
    const r = await consumeApproval(env, p.team, { subject: p.subject, id: g.approvalId, hash, jobId: g.jobId, now });
    if (!r.ok) return { kind: 'refused', refusal: { ...r.refusal, approvalId: g.approvalId } };
    return {
      kind: 'proceed',
      approvalId: r.row.id,
      note: `approved by ${r.row.decided_by ?? 'an admin'} at ${iso(r.row.decided_at ?? now)} (approval ${r.row.id})`,
    };
  }

  if (g.request.tool === 'run_script') {
    return {
      kind: 'refused',
      refusal: {
        code: 'approval_required',
        message: `Approval required by rule ${ruleNumber(g.decision.ask.rule)}: ${askReason}. A script's subprocess cannot wait for a person's approval; run this command with execute or runtime_execute to ask for it`,
      },
    };
  }

  const summary = requestSummary(g.request);
  // A pending approval of this request, answered by the client's user (a prompt) or by an admin.
  const open = async (channel: 'elicitation' | 'admin', ttlMs: number) =>
    (
      await openApproval(env, p.team, {
        subject: p.subject,
        tokenId: p.tokenId,
        tool: g.request.tool,
        hash,
        summary,
        ruleReason: askReason,
        channel,
        ttlMs,
        now,
      })
    ).row;
  if (g.policy.approvals.askClient && canPrompt(ctx, extra)) {
    const ttlSeconds = g.policy.approvals.promptTtlSeconds;
    const row = await open('elicitation', ttlSeconds * 1000);
    const requestState = await mintPromptState(env, p, { a: row.id, h: hash }, ttlSeconds, extra);
    const result = inputRequired({
      inputRequests: {
        [PROMPT_KEY]: inputRequired.elicit({
          message: `Gatehouse: the team policy asks a person to approve this run first — ${askReason}.\n\n${summary}\n\nApprove it? (approval ${row.id}; answer within ${ttlSeconds} s)`,
          requestedSchema: PROMPT_SCHEMA,
        }),
      },
      requestState,
    });
    return { kind: 'prompt', result, approvalId: row.id };
  }

  const row = await open('admin', g.policy.approvals.ttlSeconds * 1000);
  const approveWith = `gatehouse approvals approve ${row.id}`;
  const idField = g.request.tool === 'runtime_execute' ? 'approvalId' : 'approval_id';
  return {
    kind: 'refused',
    refusal: {
      code: 'approval_required',
      asked: true,
      approvalId: row.id,
      approval: { id: row.id, status: 'pending', expires_at: iso(row.expires_at), reason: askReason, approve_with: approveWith },
      message:
        `Approval required by rule ${ruleNumber(g.decision.ask.rule)}: ${askReason}. Pending approval ${row.id} (expires ${iso(row.expires_at)}). ` +
        `A team admin approves it with \`${approveWith}\` (or POST /admin/v1/approvals/${row.id}/approve, or the dashboard's Approvals list); ` +
        `then retry this exact call with "${idField}": "${row.id}". The approval runs this request once, for this caller only.`,
    },
  };
}

async function answerFromPrompt(ctx: GateCall, extra: ServerContext, g: GateInput, state: VerifiedPromptState, hash: string, now: number): Promise<GateResult> {
  const { env, principal: p } = ctx;
  if ('expired' in state) {
    return {
      kind: 'refused',
      refusal: {
        code: 'approval_expired',
        message: `Denied: the approval prompt expired before it was answered (approvals.promptTtlSeconds = ${g.policy.approvals.promptTtlSeconds}); call again to be asked again`,
      },
    };
  }
  if (state.h !== hash) {
    return {
      kind: 'refused',
      refusal: {
        code: 'approval_mismatch',
        approvalId: state.a,
        message: 'Denied: the approval prompt answered here was shown for a different request; call again to be asked about this one',
      },
    };
  }
  const view = inputResponse(extra.mcpReq.inputResponses, PROMPT_KEY);
  const approve = view.kind === 'elicit' && view.action === 'accept' && view.content?.approve === true;
  const how =
    view.kind === 'elicit'
      ? view.action === 'accept'
        ? approve
          ? 'approved'
          : 'answered no'
        : view.action === 'decline'
          ? 'declined'
          : 'cancelled'
      : 'gave no answer';
  const by = `${p.subject} (the MCP client's approval prompt)`;
  const r = await answerPrompt(env, p.team, { subject: p.subject, id: state.a, hash, approve, by, jobId: g.jobId, now });
  if (!r.ok) return { kind: 'refused', refusal: { ...r.refusal, approvalId: state.a } };
  await recordAudit(env, {
    team: p.team,
    subject: p.subject,
    tokenId: p.tokenId,
    tool: 'approval.elicitation',
    command: { approval_id: state.a, answer: how },
    decision: approve ? 'allowed' : 'denied',
    reason: `${by} ${how}: ${r.row.summary}`,
    approvalId: state.a,
    ...(approve ? { jobId: g.jobId } : {}),
  });
  if (!approve) {
    return {
      kind: 'refused',
      refusal: {
        code: 'approval_denied',
        approvalId: state.a,
        message: `Denied: the person asked to approve this run ${how} (approval ${state.a}); nothing ran`,
      },
    };
  }
  return { kind: 'proceed', approvalId: state.a, note: `approved by ${by} at ${iso(now)} (approval ${state.a})` };
}

/** A 2026-era request whose client declared form elicitation, on a gateway that can sign prompt state. */
function canPrompt(ctx: GateCall, extra: ServerContext): boolean {
  if (ctx.era !== 'modern' || !stateSecret(ctx.env)) return false;
  const caps = (extra.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY] as
    | { elicitation?: Record<string, unknown> }
    | undefined;
  const e = caps?.elicitation;
  if (!e || typeof e !== 'object') return false;
  // `{}` declares form mode only; otherwise form must be listed.
  return Object.keys(e).length === 0 || 'form' in e;
}
