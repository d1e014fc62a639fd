/**
 * The agent grant (src/contracts/agent-grant.ts) as a pure rule: what a `hello` may claim under a
 * token's grant, the admin API's body schema with its messages, and the close reason's size.
 */
import { describe, expect, it } from 'vitest';
import { AgentGrant, WS_CLOSE_REASON_MAX_BYTES, checkAgentClaims, closeReason, parseAgentGrant } from '../../src/contracts/agent-grant.ts';
import { CreateTokenBody } from '../../src/admin/tokens.ts';
import { describeIssues } from '../../src/contracts/errors.ts';

const hello = (o: { agentId?: string; sandbox?: 'gvisor' | 'bwrap' | 'none'; labels?: string[] } = {}) => ({
  agentId: o.agentId ?? 'build-1',
  sandbox: o.sandbox ?? 'bwrap',
  labels: o.labels ?? [],
});
const grant = (g: unknown) => AgentGrant.parse(g);

describe('checkAgentClaims', () => {
  it('lets a token without a grant claim anything (tokens minted before grants)', () => {
    expect(checkAgentClaims(null, hello({ sandbox: 'gvisor', labels: ['gpu'], agentId: 'any' }))).toBeNull();
  });

  it('accepts claims within the grant, labels being a subset', () => {
    const g = grant({ sandboxes: ['gvisor', 'bwrap'], labels: ['gpu', 'linux'], agentId: 'build-1' });
    expect(checkAgentClaims(g, hello({ sandbox: 'bwrap', labels: ['gpu'] }))).toBeNull();
    expect(checkAgentClaims(g, hello({ sandbox: 'gvisor', labels: [] }))).toBeNull();
  });

  it('refuses a sandbox not granted, stronger or weaker, naming what is granted', () => {
    const g = grant({ sandboxes: ['bwrap'] });
    expect(checkAgentClaims(g, hello({ sandbox: 'gvisor' }))).toEqual({
      code: 'forbidden',
      claim: 'sandbox',
      message: 'sandbox "gvisor" not granted to this token (granted: bwrap)',
    });
    expect(checkAgentClaims(g, hello({ sandbox: 'none' }))?.claim).toBe('sandbox');
  });

  it('refuses a label not granted, naming each one', () => {
    const g = grant({ sandboxes: ['bwrap'], labels: ['linux'] });
    expect(checkAgentClaims(g, hello({ labels: ['linux', 'gpu', 'arm'] }))).toEqual({
      code: 'forbidden',
      claim: 'labels',
      message: 'label "gpu", "arm" not granted to this token (granted: linux)',
    });
    expect(checkAgentClaims(grant({ sandboxes: ['bwrap'] }), hello({ labels: ['gpu'] }))?.message).toBe(
      'label "gpu" not granted to this token (granted: none)',
    );
  });

  it('refuses another agent id than the fixed one; without a fixed id any id is fine', () => {
    expect(checkAgentClaims(grant({ sandboxes: ['bwrap'], agentId: 'build-1' }), hello({ agentId: 'build-2' }))).toEqual({
      code: 'forbidden',
      claim: 'agentId',
      message: 'agent id "build-2" not granted: this token is for agent id "build-1" (--id)',
    });
    expect(checkAgentClaims(grant({ sandboxes: ['bwrap'] }), hello({ agentId: 'whatever' }))).toBeNull();
  });
});

describe('closeReason', () => {
  it('keeps a reason that fits a close frame, and cuts a longer one (multi-byte too) to 123 bytes', () => {
    expect(closeReason('short')).toBe('short');
    const long = closeReason(`label ${'"x",'.repeat(100)}`);
    expect(new TextEncoder().encode(long).byteLength).toBeLessThanOrEqual(WS_CLOSE_REASON_MAX_BYTES);
    expect(long.endsWith('…')).toBe(true);
    const wide = closeReason('é'.repeat(200));
    expect(new TextEncoder().encode(wide).byteLength).toBeLessThanOrEqual(WS_CLOSE_REASON_MAX_BYTES);
  });

  it('fits every refusal a maximal grant can produce', () => {
    const g = grant({ sandboxes: ['bwrap'], labels: Array.from({ length: 32 }, (_, i) => `${i}`.padEnd(64, 'l')), agentId: 'a'.repeat(128) });
    const r = checkAgentClaims(g, hello({ agentId: 'b'.repeat(128) }))!;
    expect(new TextEncoder().encode(closeReason(r.message)).byteLength).toBeLessThanOrEqual(WS_CLOSE_REASON_MAX_BYTES);
  });
});

describe('the grant as the admin API takes it (POST /admin/v1/tokens agentGrant)', () => {
  const body = (agentGrant: unknown, scopes = ['agent']) => CreateTokenBody.safeParse({ subject: 's', scopes, agentGrant });
  const problem = (agentGrant: unknown, scopes?: string[]) => {
    const r = body(agentGrant, scopes);
    return r.success ? null : describeIssues(r.error.issues);
  };

  it('normalises a good grant: duplicates dropped, labels default to none', () => {
    const r = body({ sandboxes: ['gvisor', 'gvisor', 'bwrap'] });
    expect(r.success && r.data.agentGrant).toEqual({ sandboxes: ['gvisor', 'bwrap'], labels: [] });
    expect(CreateTokenBody.parse({ subject: 's', scopes: ['agent'] }).agentGrant).toBeUndefined();
  });

  it('says what is wrong and what is allowed', () => {
    expect(problem({ sandboxes: ['gvisr'] })).toBe('agentGrant.sandboxes.0: unknown sandbox "gvisr"; allowed: gvisor, bwrap, none');
    expect(problem({ sandboxes: [] })).toBe('agentGrant.sandboxes: name at least one sandbox the agent may claim (gvisor, bwrap, none)');
    expect(problem({ sandboxes: ['bwrap'], labels: Array(33).fill('x') })).toBe('agentGrant.labels: at most 32 labels (an agent advertises at most that many)');
    expect(problem({ sandboxes: ['bwrap'], agentId: '' })).toMatch(/^agentGrant\.agentId: agentId must be 1-128 characters/);
    expect(problem({ sandboxes: ['bwrap'], sandbox: 'x' })).toBe(
      'agentGrant: unknown key "sandbox" (did you mean "sandboxes"?); valid keys: sandboxes, labels, agentId',
    );
    expect(problem({ sandboxes: ['bwrap'] }, ['execute', 'admin'])).toBe(
      'agentGrant: says what an agent may claim, so it needs the "agent" scope (scopes: execute, admin); add "agent" to scopes or leave agentGrant out',
    );
  });
});

describe('parseAgentGrant (the Worker → Durable Object header)', () => {
  it('reads none as null, a grant as itself, and refuses anything else', () => {
    expect(parseAgentGrant(null)).toEqual({ ok: true, value: null });
    expect(parseAgentGrant('{"sandboxes":["bwrap"]}')).toEqual({ ok: true, value: { sandboxes: ['bwrap'], labels: [] } });
    expect(parseAgentGrant('{nope').ok).toBe(false);
    expect(parseAgentGrant('{"sandboxes":"bwrap"}').ok).toBe(false);
  });
});
