/**
 * What an agent token lets its agents claim in `hello`: the sandboxes, the placement labels and,
 * optionally, the one agent id. An admin grants it when minting the token (admin API `agent`,
 * `gatehouse token create --sandbox … --label … --agent-id …`); it travels in the token as the
 * `agent_grant` claim. The team's Durable Object closes a connection whose `hello` claims more
 * (AGENT_CLAIM_REFUSED_CLOSE), so the policy's `sandbox.minimum` and a job's `labels`/`agent` are
 * decided on what an admin granted, never on what an agent says about itself.
 *
 * A token without a grant lets its agents claim what they say (tokens minted before grants existed).
 */
import { z } from 'zod';
import { AgentLabel, SandboxKind } from './agent-protocol.ts';
import { strictInput } from './strict-input.ts';
import { describeIssues } from './errors.ts';

/** The token claim that carries the grant. */
export const AGENT_GRANT_CLAIM = 'agent_grant';

/** The Worker → DO header that carries an agent token's grant (JSON); absent: the token has none. */
export const AGENT_GRANT_HEADER = 'X-Gatehouse-Agent-Grant';

/**
 * WebSocket close code of a `hello` that claims a sandbox, label or agent id its token does not
 * grant. Permanent: the token's grant and the agent's flags are what they are, so the agent stops
 * instead of reconnecting (exit AGENT_REFUSED_EXIT_CODE).
 */
export const AGENT_CLAIM_REFUSED_CLOSE = 4403;
/** The agent's exit status after AGENT_CLAIM_REFUSED_CLOSE (sysexits' EX_CONFIG; the systemd unit does not restart on it). */
export const AGENT_REFUSED_EXIT_CODE = 78;

/** A close frame's reason is at most 123 bytes of UTF-8 (RFC 6455 §5.5: 125-byte control payload, 2 of them the code). */
export const WS_CLOSE_REASON_MAX_BYTES = 123;

const SANDBOXES = SandboxKind.options.join(', ');
/** The agent ids `gatehouse agent --id` accepts. */
const AGENT_ID_RE = /^[\w.@:-]{1,128}$/;
/** As many labels as a `hello` may carry. */
const MAX_GRANTED_LABELS = 32;

export const AgentGrant = strictInput({
  sandboxes: z
    .array(z.enum(SandboxKind.options, { error: (iss) => `unknown sandbox ${JSON.stringify(iss.input)}; allowed: ${SANDBOXES}` }))
    .min(1, `name at least one sandbox the agent may claim (${SANDBOXES})`)
    .transform((xs) => [...new Set(xs)]),
  labels: z
    .array(AgentLabel)
    .max(MAX_GRANTED_LABELS, `at most ${MAX_GRANTED_LABELS} labels (an agent advertises at most that many)`)
    .default([])
    .transform((xs) => [...new Set(xs)]),
  agentId: z.string().regex(AGENT_ID_RE, 'agentId must be 1-128 characters of letters, digits, . _ - @ : (as `gatehouse agent --id` takes)').optional(),
});
export type AgentGrant = z.infer<typeof AgentGrant>;

/** Why a `hello` was refused: which claim, and a message that says what was granted. */
export interface ClaimRefusal {
  code: 'forbidden';
  claim: 'agentId' | 'sandbox' | 'labels';
  message: string;
}

const quoted = (s: string) => JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s);

/**
 * The claims of a `hello` checked against its token's grant: null when every claim is granted
 * (always, for a token without a grant). Pure: the caller closes the socket and audits.
 */
export function checkAgentClaims(grant: AgentGrant | null, hello: { agentId: string; sandbox: SandboxKind; labels: readonly string[] }): ClaimRefusal | null {
  if (!grant) return null;
  if (grant.agentId !== undefined && hello.agentId !== grant.agentId) {
    return {
      code: 'forbidden',
      claim: 'agentId',
      message: `agent id ${quoted(hello.agentId)} not granted: this token is for agent id "${grant.agentId}" (--id)`,
    };
  }
  if (!grant.sandboxes.includes(hello.sandbox)) {
    return { code: 'forbidden', claim: 'sandbox', message: `sandbox "${hello.sandbox}" not granted to this token (granted: ${grant.sandboxes.join(', ')})` };
  }
  const extra = hello.labels.filter((l) => !grant.labels.includes(l));
  if (extra.length) {
    const names = extra.map(quoted).join(', ');
    return { code: 'forbidden', claim: 'labels', message: `label ${names} not granted to this token (granted: ${grant.labels.join(', ') || 'none'})` };
  }
  return null;
}

/** `text` cut to fit a WebSocket close frame's reason. */
export function closeReason(text: string): string {
  const bytes = new TextEncoder().encode(text);
  if (bytes.byteLength <= WS_CLOSE_REASON_MAX_BYTES) return text;
  let s = text;
  // Drop characters (not bytes) until the text and its ellipsis (3 bytes) fit.
  while (new TextEncoder().encode(s).byteLength > WS_CLOSE_REASON_MAX_BYTES - 3) s = s.slice(0, -1);
  return `${s}…`;
}

/** A grant as JSON text (the Worker → Durable Object header): null for none, or why it does not parse. */
export function parseAgentGrant(json: string | null): { ok: true; value: AgentGrant | null } | { ok: false; message: string } {
  if (json === null) return { ok: true, value: null };
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return { ok: false, message: 'agent grant is not JSON' };
  }
  const g = AgentGrant.safeParse(raw);
  return g.success ? { ok: true, value: g.data } : { ok: false, message: `invalid agent grant: ${describeIssues(g.error.issues)}` };
}
