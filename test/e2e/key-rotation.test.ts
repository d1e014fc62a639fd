/**
 * Rotating the signing key under load refuses no call (docs/operations.md, "Rotating the signing key").
 * During a rotation's deploys, instances of two versions of the Worker serve side by side: one still
 * signing with the old key (after step 1 it also trusts the new one), one signing with the new key (step 2:
 * it still trusts the old one). Two real gateways (wrangler dev) stand for those two versions, with one
 * issuer and audience as a deployment has; tokens each of them minted through its admin API are sent to
 * both, concurrently, and every call must pass. (A real rollout replaces isolates; locally a gateway's
 * secrets change only with a restart, so the two versions run as two processes.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeProtectedHeader } from 'jose';
import { startGateway, type Gateway } from './harness.ts';
import { generateSigningKey, mintToken, publicJwk } from '../../src/auth/mint.ts';
import { initializeStatus } from '../support/mcp-initialize.ts';

/** One issuer for both versions, as one deployment has: a loopback one, so each gateway serves on its own port. */
const ISSUER = 'http://127.0.0.1';
const AUDIENCE = `${ISSUER}/mcp`;
const TEAM = 'rotate';
/** Calls per (token, gateway) pair: far below the per-token rate limit of a gateway (300 a minute on /mcp). */
const CALLS_PER_PAIR = 25;
const CONCURRENCY = 8;

let oldKey: string;
let newKey: string;
let before: Gateway;
let after: Gateway;

const kid = (key: string) => (JSON.parse(key) as { kid: string }).kid;

beforeAll(async () => {
  oldKey = await generateSigningKey();
  newKey = await generateSigningKey();
  const common = { GATEHOUSE_ISSUER: ISSUER, GATEHOUSE_AUDIENCE: AUDIENCE };
  [before, after] = await Promise.all([
    // Step 1: signs with the old key, already trusts the new one.
    startGateway({ vars: { ...common, GATEHOUSE_SIGNING_KEY: oldKey, GATEHOUSE_VERIFY_KEY: JSON.stringify(publicJwk(newKey)) } }),
    // Step 2: signs with the new key, still trusts the old one.
    startGateway({ vars: { ...common, GATEHOUSE_SIGNING_KEY: newKey, GATEHOUSE_VERIFY_KEY: JSON.stringify(publicJwk(oldKey)) } }),
  ]);
});
afterAll(async () => {
  await Promise.all([before?.stop(), after?.stop()]);
});

/** Client tokens minted by `gw`'s admin API (signed with whatever key that version signs with). */
async function clientTokens(gw: Gateway, key: string, n: number): Promise<string[]> {
  const { token: admin } = await mintToken({
    privateJwk: key,
    issuer: ISSUER,
    audience: AUDIENCE,
    team: TEAM,
    subject: 'rotation-admin',
    scopes: ['admin'],
    ttlSeconds: 600,
    minter: { kind: 'bootstrap' },
  });
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await fetch(`${gw.url}/admin/v1/tokens`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${admin}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ subject: `client-${i}`, scopes: ['execute'], ttlSeconds: 3600 }),
    });
    expect(r.status, await r.clone().text()).toBe(201);
    out.push(((await r.json()) as { token: string }).token);
  }
  return out;
}

const initialize = (gw: Gateway, token: string) => initializeStatus(gw.mcpUrl, token);

describe('signing key rotation under load', () => {
  it('refuses no call while both versions serve, whichever version minted the token and whichever serves it', async () => {
    const oldTokens = await clientTokens(before, oldKey, 3);
    const newTokens = await clientTokens(after, newKey, 3);
    expect(new Set(oldTokens.map((t) => decodeProtectedHeader(t).kid))).toEqual(new Set([kid(oldKey)]));
    expect(new Set(newTokens.map((t) => decodeProtectedHeader(t).kid))).toEqual(new Set([kid(newKey)]));

    const calls: [Gateway, string][] = [];
    for (let i = 0; i < CALLS_PER_PAIR; i++) for (const t of [...oldTokens, ...newTokens]) for (const gw of [before, after]) calls.push([gw, t]);
    const statuses = new Map<number, number>();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < calls.length) {
          const [gw, t] = calls[next++];
          const s = await initialize(gw, t);
          statuses.set(s, (statuses.get(s) ?? 0) + 1);
        }
      }),
    );
    expect(Object.fromEntries(statuses)).toEqual({ 200: calls.length });
  });

  it('publishes both keys in each version’s JWKS, and refuses a key neither trusts', async () => {
    for (const gw of [before, after]) {
      const keys = ((await (await fetch(`${gw.url}/.well-known/jwks.json`)).json()) as { keys: { kid: string; d?: string }[] }).keys;
      expect(keys.map((k) => k.kid).sort()).toEqual([kid(oldKey), kid(newKey)].sort());
      expect(keys.every((k) => k.d === undefined)).toBe(true);
    }
    const stranger = await generateSigningKey();
    const { token } = await mintToken({
      privateJwk: stranger,
      issuer: ISSUER,
      audience: AUDIENCE,
      team: TEAM,
      subject: 'stranger',
      scopes: ['execute'],
      ttlSeconds: 600,
      minter: { kind: 'bootstrap' },
    });
    expect([await initialize(before, token), await initialize(after, token)]).toEqual([401, 401]);
  });
});
