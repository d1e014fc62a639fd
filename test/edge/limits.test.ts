/**
 * Requests are bounded before they cause work: a batch's size and its cancellations are checked
 * before anything is routed to the team's Durable Object, and per-token / per-team rate limits
 * (the Workers Rate Limiting binding, which runs in wrangler dev) answer 429 with Retry-After.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startGateway, type Gateway } from '../e2e/harness.ts';
import { MAX_BATCH_MESSAGES, MAX_CANCELLATIONS_PER_REQUEST } from '../../src/mcp/bounds.ts';
import { RATE_LIMITS, RATE_LIMIT_PERIOD_S } from '../../src/edge/rate-limit.ts';

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway();
});
afterAll(async () => {
  await gw?.stop();
});

const cancel = (i: number) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: i, reason: 'x' } });

async function postMcp(token: string, body: unknown): Promise<Response> {
  return fetch(gw.mcpUrl, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify(body),
  });
}

/** Sends requests in parallel rounds until one answers 429 (or `max` were sent); returns that answer. */
async function untilLimited(send: () => Promise<Response>, max: number): Promise<{ limited: Response | null; sent: number }> {
  let sent = 0;
  while (sent < max) {
    const round = await Promise.all(Array.from({ length: 20 }, () => send()));
    sent += round.length;
    const hit = round.find((r) => r.status === 429);
    for (const r of round) if (r !== hit) await r.body?.cancel();
    if (hit) return { limited: hit, sent };
  }
  return { limited: null, sent };
}

describe('a batch is bounded before anything is routed', () => {
  it('the 1 MB batch of 15,500 cancellations is refused at once (artifacts:read token)', async () => {
    const token = await gw.token({ team: 'acme', scopes: ['artifacts:read'] });
    // Compact messages (routeCancellations looks only at method and requestId): just under 1 MiB.
    const body = Array.from({ length: 15_500 }, (_, i) => ({ method: 'notifications/cancelled', params: { requestId: i } }));
    expect(JSON.stringify(body).length).toBeLessThan(1024 * 1024);
    const r = await postMcp(token, body);
    expect(r.status).toBe(400);
    const j = (await r.json()) as { error: { code: number; message: string } };
    expect(j.error.code).toBe(-32600);
    expect(j.error.message).toContain(`at most ${MAX_BATCH_MESSAGES} are accepted`);
  });
  it(`more than ${MAX_CANCELLATIONS_PER_REQUEST} cancellations in one request are refused`, async () => {
    const token = await gw.token({ team: 'acme', scopes: ['execute'] });
    const r = await postMcp(
      token,
      Array.from({ length: MAX_CANCELLATIONS_PER_REQUEST + 1 }, (_, i) => cancel(i)),
    );
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain('notifications/cancelled');
  });
});

describe('rate limits (per token, per team) answer 429 with Retry-After', () => {
  it('the admin API: one token over its budget is stopped; another token of the team is not', async () => {
    const a = await gw.token({ team: 'limited', scopes: ['admin'] });
    const { limited, sent } = await untilLimited(
      () => fetch(`${gw.url}/admin/v1/whoami`, { headers: { Authorization: `Bearer ${a}` } }),
      RATE_LIMITS.admin.token * 3,
    );
    expect(limited, `no 429 after ${sent} requests`).not.toBeNull();
    expect(limited!.headers.get('Retry-After')).toBe(String(RATE_LIMIT_PERIOD_S));
    const e = (await limited!.json()) as { error: { code: string; message: string } };
    expect(e.error.code).toBe('rate_limited');
    expect(e.error.message).toContain(`at most ${RATE_LIMITS.admin.token} admin API requests`);
    const b = await gw.token({ team: 'limited', scopes: ['admin'] });
    expect((await fetch(`${gw.url}/admin/v1/whoami`, { headers: { Authorization: `Bearer ${b}` } })).status).toBe(200);
  });
  it('/mcp: one token over its budget is stopped', async () => {
    const t = await gw.token({ team: 'busy', scopes: ['execute'] });
    const { limited, sent } = await untilLimited(() => fetch(gw.mcpUrl, { headers: { Authorization: `Bearer ${t}` } }), RATE_LIMITS.mcp.token * 3);
    expect(limited, `no 429 after ${sent} requests`).not.toBeNull();
    expect(limited!.headers.get('Retry-After')).toBe(String(RATE_LIMIT_PERIOD_S));
  });
  it('the limits in the code are the ones wrangler.toml configures', () => {
    const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8');
    const limitOf = (name: string) => {
      const m = new RegExp(`name = "${name}"\\s*\\nnamespace_id = "\\d+"\\s*\\nsimple = \\{ limit = (\\d+), period = (\\d+) \\}`).exec(toml);
      expect(m, name).not.toBeNull();
      expect(Number(m![2])).toBe(RATE_LIMIT_PERIOD_S);
      return Number(m![1]);
    };
    expect(limitOf('RL_MCP_TOKEN')).toBe(RATE_LIMITS.mcp.token);
    expect(limitOf('RL_MCP_TEAM')).toBe(RATE_LIMITS.mcp.team);
    expect(limitOf('RL_ADMIN_TOKEN')).toBe(RATE_LIMITS.admin.token);
    expect(limitOf('RL_ADMIN_TEAM')).toBe(RATE_LIMITS.admin.team);
  });
});
