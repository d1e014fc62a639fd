/**
 * The admin API through the real gateway: tokens, policy, audit — always the admin token's own
 * team; another team is "not found", and non-admin tokens are refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { auditInsertSql, execSql, type SeedAudit } from './seed.ts';

let gw: Gateway;
const BASE = Date.now() - 3600_000;
const TOOLS = ['execute', 'runtime_execute', 'query_output', 'policy_check'];
const DECISIONS = ['allowed', 'denied', 'failed'];
/** 60 rows for acme (ids 1..60 in time order) and 5 for globex, interleaved. */
const seedRows: SeedAudit[] = [];
for (let i = 0; i < 60; i++) {
  seedRows.push({
    at: BASE + i * 1000,
    team: 'acme',
    subject: i % 2 ? 'ci-bot' : 'alice',
    tool: TOOLS[i % 4],
    decision: DECISIONS[i % 3],
    command: { mode: 'argv', command: 'echo', args: [`row-${i}`] },
    reason: `seed ${i}`,
    exitStatus: i % 3 === 0 ? 'exit 0' : undefined,
  });
  if (i % 12 === 0)
    seedRows.push({ at: BASE + i * 1000 + 1, team: 'globex', subject: 'eve', tool: 'execute', decision: 'denied', reason: 'globex secret row' });
}

beforeAll(async () => {
  gw = await startGateway({ beforeStart: async (persist) => execSql(persist, auditInsertSql(seedRows)) });
});
afterAll(async () => {
  await gw?.stop();
});

async function call(method: string, path: string, body?: unknown, o: { team?: string; scopes?: string[]; raw?: string } = {}) {
  const token = await gw.token({ team: o.team ?? 'acme', scopes: o.scopes ?? ['admin'], subject: 'admin-alice' });
  const r = await fetch(`${gw.url}/admin/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: o.raw ?? (body === undefined ? undefined : JSON.stringify(body)),
  });
  const text = await r.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: r.status, json };
}

describe('tokens', () => {
  it('mints a token (201) that the gateway accepts, recorded without the token itself', async () => {
    const before = Date.now();
    const c = await call('POST', '/tokens', { subject: 'ci-bot', scopes: ['execute', 'artifacts:read'], note: 'for CI' });
    expect(c.status).toBe(201);
    expect(c.json).toMatchObject({ team: 'acme', subject: 'ci-bot', scopes: ['execute', 'artifacts:read'] });
    const claims = decodeJwt(c.json.token);
    expect(claims).toMatchObject({ team: 'acme', sub: 'ci-bot', scope: 'execute artifacts:read', jti: c.json.jti, iss: gw.issuer, aud: gw.audience });
    // Default lifetime: 30 days; times in ms.
    expect(c.json.expiresAt).toBeGreaterThanOrEqual(before + 30 * 86400_000 - 2000);
    expect(c.json.expiresAt).toBeLessThanOrEqual(Date.now() + 30 * 86400_000 + 2000);
    // The new token works where its scopes allow and is refused elsewhere.
    const who = await fetch(`${gw.url}/admin/v1/tokens`, { headers: { Authorization: `Bearer ${c.json.token}` } });
    expect(who.status).toBe(403);

    const l = await call('GET', '/tokens');
    expect(l.status).toBe(200);
    const row = l.json.tokens.find((t: { jti: string }) => t.jti === c.json.jti);
    expect(row).toMatchObject({ subject: 'ci-bot', scopes: ['execute', 'artifacts:read'], revokedAt: null, note: 'for CI' });
    expect(row.createdAt).toBeGreaterThanOrEqual(before);
    expect(JSON.stringify(l.json)).not.toContain(c.json.token);
  });

  it('honours ttlSeconds and refuses more than a year', async () => {
    const c = await call('POST', '/tokens', { subject: 'short', scopes: ['execute'], ttlSeconds: 3600 });
    expect(c.status).toBe(201);
    expect(c.json.expiresAt - Date.now()).toBeLessThanOrEqual(3600_000 + 2000);
    const long = await call('POST', '/tokens', { subject: 'long', scopes: ['execute'], ttlSeconds: 366 * 86400 });
    expect(long.status).toBe(400);
    expect(long.json.error.message).toMatch(/at most 31536000 \(1 year\)/);
  });

  it('refuses an unknown scope, naming the allowed ones', async () => {
    const r = await call('POST', '/tokens', { subject: 'x', scopes: ['execute', 'root'] });
    expect(r.status).toBe(400);
    expect(r.json.error).toEqual({
      code: 'invalid_argument',
      message: expect.stringContaining('unknown scope "root"; allowed: execute, artifacts:read, admin, agent'),
    });
  });

  it('refuses bad bodies with 400', async () => {
    expect((await call('POST', '/tokens', undefined, { raw: '{nope' })).status).toBe(400);
    expect((await call('POST', '/tokens', { scopes: ['execute'] })).json.error.message).toMatch(/subject/);
    expect((await call('POST', '/tokens', { subject: 'x', scopes: [] })).json.error.message).toMatch(/at least one scope/);
    expect((await call('POST', '/tokens', { subject: 'x', scopes: ['execute'], admin: true })).status).toBe(400);
  });

  it('treats another team in the body as not found', async () => {
    const r = await call('POST', '/tokens', { team: 'globex', subject: 'x', scopes: ['execute'] });
    expect(r.status).toBe(404);
    expect(r.json.error).toEqual({ code: 'not_found', message: 'team "globex" not found' });
    expect((await call('POST', '/tokens', { team: 'acme', subject: 'x', scopes: ['execute'] })).status).toBe(201);
  });

  it('revokes a token (idempotently) and the revocation shows in the list', async () => {
    const c = await call('POST', '/tokens', { subject: 'to-revoke', scopes: ['admin'] });
    const d = await call('DELETE', `/tokens/${c.json.jti}`);
    expect(d.status).toBe(200);
    expect(d.json.jti).toBe(c.json.jti);
    expect(typeof d.json.revokedAt).toBe('number');
    const again = await call('DELETE', `/tokens/${c.json.jti}`);
    expect(again.json.revokedAt).toBe(d.json.revokedAt);
    const l = await call('GET', '/tokens');
    expect(l.json.tokens.find((t: { jti: string }) => t.jti === c.json.jti).revokedAt).toBe(d.json.revokedAt);
    const used = await fetch(`${gw.url}/admin/v1/tokens`, { headers: { Authorization: `Bearer ${c.json.token}` } });
    expect(used.status).toBe(401);
  });

  it("cannot see or revoke another team's tokens", async () => {
    const theirs = await call('POST', '/tokens', { subject: 'globex-bot', scopes: ['execute'] }, { team: 'globex' });
    expect(theirs.status).toBe(201);
    const d = await call('DELETE', `/tokens/${theirs.json.jti}`);
    expect(d.status).toBe(404);
    expect(d.json.error.code).toBe('not_found');
    const mine = await call('GET', '/tokens');
    expect(JSON.stringify(mine.json)).not.toContain(theirs.json.jti);
    // Still valid for its own team.
    const used = await fetch(`${gw.url}/admin/v1/tokens`, { headers: { Authorization: `Bearer ${theirs.json.token}` } });
    expect(used.status).toBe(403); // execute-only, but not revoked (that would be 401)
  });
});

describe('team paths', () => {
  it('serves /teams/<own team>/... like the plain paths', async () => {
    const r = await call('GET', '/teams/acme/tokens');
    expect(r.status).toBe(200);
    expect(Array.isArray(r.json.tokens)).toBe(true);
    expect((await call('GET', '/teams/acme')).json).toMatchObject({ team: 'acme', subject: 'admin-alice' });
  });

  it('answers 404 "team not found" for any other team, never forbidden', async () => {
    for (const [m, p] of [
      ['GET', '/teams/globex/tokens'],
      ['PUT', '/teams/globex/policy'],
      ['GET', '/teams/globex/audit'],
      ['GET', '/teams/globex'],
      ['DELETE', '/teams/globex/tokens/x'],
    ]) {
      const r = await call(m, p, m === 'PUT' ? DEFAULT_POLICY : undefined);
      expect(r.status, `${m} ${p}`).toBe(404);
      expect(r.json.error).toEqual({ code: 'not_found', message: 'team "globex" not found' });
    }
  });

  it('answers unknown admin routes with a JSON 404', async () => {
    const r = await call('GET', '/nothing-here');
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe('not_found');
  });
});

describe('policy', () => {
  it('returns the default policy until one is set', async () => {
    const r = await call('GET', '/policy', undefined, { team: 'initech' });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ team: 'initech', version: 0, updatedAt: null, updatedBy: null, isDefault: true, policy: DEFAULT_POLICY });
  });

  it('stores a valid policy as a new version, per team', async () => {
    const doc = { ...DEFAULT_POLICY, shell: { enabled: true, allow: ['ls -la'] } };
    const p1 = await call('PUT', '/policy', doc, { team: 'initech' });
    expect(p1.status).toBe(200);
    expect(p1.json).toMatchObject({
      team: 'initech',
      version: 1,
      updatedBy: 'admin-alice',
      isDefault: false,
      policy: { shell: { enabled: true, allow: ['ls -la'] } },
    });
    const p2 = await call('PUT', '/policy', { version: 1 }, { team: 'initech' });
    expect(p2.json.version).toBe(2);
    // Defaults are filled in by the schema.
    expect(p2.json.policy.limits.maxConcurrentJobs).toBe(2);
    const g = await call('GET', '/policy', undefined, { team: 'initech' });
    expect(g.json).toMatchObject({ version: 2, isDefault: false });
    expect(typeof g.json.updatedAt).toBe('number');
    // Another team is untouched.
    expect((await call('GET', '/policy', undefined, { team: 'umbrella' })).json.isDefault).toBe(true);
  });

  it('refuses an invalid policy with 400 naming the failing paths', async () => {
    const r = await call('PUT', '/policy', { ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: -5 }, shell: { enabled: 'yes' } });
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('invalid_argument');
    expect(r.json.error.message).toContain('limits.maxTimeoutMs');
    expect(r.json.error.message).toContain('shell.enabled');
    expect((await call('PUT', '/policy', undefined, { raw: 'not json' })).status).toBe(400);
  });

  it('refuses policy changes from an execute token (403)', async () => {
    const r = await call('PUT', '/policy', DEFAULT_POLICY, { scopes: ['execute'] });
    expect(r.status).toBe(403);
    expect(r.json.error.code).toBe('insufficient_scope');
  });

  it('dry-runs a command against the policy', async () => {
    const yes = await call('POST', '/policy/check', { command: 'git', args: ['status'] }, { team: 'umbrella' });
    expect(yes.status).toBe(200);
    expect(yes.json).toMatchObject({ allowed: true, stage: expect.any(String), reason: expect.any(String), notes: expect.any(Array) });
    const no = await call('POST', '/policy/check', { command: 'curl', args: ['http://x'] }, { team: 'umbrella' });
    expect(no.json.allowed).toBe(false);
    expect(no.json.reason).toMatch(/curl/);
    // No args: a shell string, which the default policy does not allow.
    const shell = await call('POST', '/policy/check', { command: 'ls | wc -l' }, { team: 'umbrella' });
    expect(shell.json.allowed).toBe(false);
    const bad = await call('POST', '/policy/check', { args: ['x'] }, { team: 'umbrella' });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/command/);
  });
});

describe('audit', () => {
  type Page = {
    entries: { id: number; at: number; decision: string; tool: string; subject: string; reason: string; command: unknown }[];
    nextCursor: string | null;
  };
  // The seeded rows only: the token and policy tests above left audit rows of their own admin actions (now).
  const seeded = (q: string) => (q.includes('until=') ? q : `${q}${q ? '&' : '?'}until=${BASE + 3_600_000}`);
  const audit = async (q: string, team = 'acme') =>
    (await call('GET', `/audit${seeded(q)}`, undefined, { team })) as { status: number; json: Page & { error?: { message: string } } };

  it('pages newest first: 50 by default, then the rest through the cursor', async () => {
    const p1 = await audit('');
    expect(p1.status).toBe(200);
    expect(p1.json.entries).toHaveLength(50);
    expect(p1.json.entries[0].reason).toBe('seed 59');
    expect(p1.json.entries.map((e) => e.at)).toEqual([...p1.json.entries.map((e) => e.at)].sort((a, b) => b - a));
    expect(p1.json.entries[0].command).toEqual({ mode: 'argv', command: 'echo', args: ['row-59'] });
    expect(p1.json.nextCursor).toBeTruthy();
    const p2 = await audit(`?cursor=${encodeURIComponent(p1.json.nextCursor!)}`);
    expect(p2.json.entries.map((e) => e.reason)).toEqual(Array.from({ length: 10 }, (_, i) => `seed ${9 - i}`));
    expect(p2.json.nextCursor).toBeNull();
  });

  it("never shows another team's rows", async () => {
    const all = await audit('?limit=500');
    expect(all.json.entries).toHaveLength(60);
    expect(JSON.stringify(all.json)).not.toContain('globex');
    const theirs = await audit('?limit=500', 'globex');
    expect(theirs.json.entries).toHaveLength(5);
  });

  it('filters by decision, tool, subject and time, and pages filtered results', async () => {
    const denied = await audit('?decision=denied&limit=500');
    expect(denied.json.entries).toHaveLength(20);
    expect(denied.json.entries.every((e) => e.decision === 'denied')).toBe(true);
    const tool = await audit('?tool=query_output&subject=alice&limit=500');
    expect(tool.json.entries.length).toBe(15);
    expect(tool.json.entries.every((e) => e.tool === 'query_output' && e.subject === 'alice')).toBe(true);
    const window = await audit(`?since=${BASE + 10_000}&until=${BASE + 20_000}&limit=500`);
    expect(window.json.entries.map((e) => e.reason)).toEqual(Array.from({ length: 10 }, (_, i) => `seed ${19 - i}`));
    const iso = await audit(`?since=${new Date(BASE + 55_000).toISOString()}`);
    expect(iso.json.entries).toHaveLength(5);
    const small = await audit('?decision=failed&limit=7');
    expect(small.json.entries).toHaveLength(7);
    const rest = await audit(`?decision=failed&limit=50&cursor=${small.json.nextCursor}`);
    expect(rest.json.entries).toHaveLength(13);
    expect(rest.json.entries.every((e) => e.decision === 'failed')).toBe(true);
    expect(Math.max(...rest.json.entries.map((e) => e.id))).toBeLessThan(Math.min(...small.json.entries.map((e) => e.id)));
  });

  it('refuses bad filters with 400 naming the allowed values', async () => {
    const cases: [string, RegExp][] = [
      ['?decision=maybe', /decision must be one of allowed, denied, failed/],
      ['?tool=rm', /tool must be one of execute, runtime_execute/],
      ['?limit=0', /limit must be an integer from 1 to 500/],
      ['?limit=501', /limit must be an integer from 1 to 500/],
      ['?since=yesterday', /since must be milliseconds since the epoch or an ISO 8601 date/],
      ['?cursor=garbage', /cursor is not valid/],
      ['?team=globex', /unknown query parameter "team"; allowed: limit, cursor/],
    ];
    for (const [q, re] of cases) {
      const r = await audit(q);
      expect(r.status, q).toBe(400);
      expect(r.json.error!.message).toMatch(re);
    }
  });
});

describe('policy presets', () => {
  it('lists strict, standard, builds and open with what each allows, and applies one as a new version', async () => {
    const list = await call('GET', '/policy/presets');
    expect(list.status).toBe(200);
    expect(list.json.presets.map((p: { name: string }) => p.name)).toEqual(['strict', 'standard', 'builds', 'open']);
    const before = (await call('GET', '/policy')).json.version;
    const put = await call('PUT', '/policy/presets/strict');
    expect(put.status).toBe(200);
    expect(put.json).toMatchObject({ preset: 'strict', version: before + 1, policy: { runtime: { enabled: false } } });
    const nope = await call('PUT', '/policy/presets/lax');
    expect(nope.status).toBe(404);
    expect(nope.json.error.message).toContain('presets: strict, standard, builds, open');
  });
});
