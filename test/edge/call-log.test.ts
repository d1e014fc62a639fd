/**
 * The admin API's call line (src/edge/call-log.ts), on a small app mounted the way src/index.ts and
 * src/admin/index.ts mount the admin routes: the route's pattern (never its values or query), the status, the error
 * code of a refusal, who called. The MCP side's lines come from a real gateway's log:
 * test/e2e/observability.test.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Hono } from 'hono';
import type { AppEnv } from '../../src/env.ts';
import type { Principal } from '../../src/auth/principal.ts';
import { adminCallLog, type CallLine } from '../../src/edge/call-log.ts';
import { apiError } from '../../src/admin/http.ts';

const principal: Principal = { team: 'acme', subject: 'ops', scopes: ['admin'], tokenId: 'jti-admin', issuer: 'https://gw' };

function app() {
  const teamApi = new Hono<AppEnv>();
  teamApi.get('/tokens', (c) => c.json({ tokens: [] }));
  teamApi.delete('/tokens/:jti', (c) => apiError(c, 'not_found', `no token ${c.req.param('jti')}`));
  teamApi.put('/policy', (c) => apiError(c, 'insufficient_scope', 'an owner may change the policy'));
  teamApi.get('/boom', () => {
    throw new Error('bug');
  });
  const admin = new Hono<AppEnv>();
  admin.onError((_e, c) => apiError(c, 'internal', 'bug'));
  admin.use('*', adminCallLog());
  admin.route('/teams/:team', teamApi);
  admin.route('/', teamApi);
  const root = new Hono<AppEnv>();
  root.use('/admin/v1/*', async (c, next) => {
    c.set('principal', principal);
    await next();
  });
  root.route('/admin/v1', admin);
  return root;
}

const lines = (calls: unknown[][]): CallLine[] => calls.map((c) => c[0] as CallLine);

afterEach(() => {
  vi.restoreAllMocks();
});

describe('admin call line', () => {
  it('names the route by its pattern with the status and error code, never the values in the path or query', async () => {
    const info = vi.spyOn(console, 'info').mockImplementation(() => {});
    const a = app();
    await a.request('/admin/v1/tokens?subject=secret-subject-filter');
    await a.request('/admin/v1/teams/acme/tokens/jti-of-a-leaked-token', { method: 'DELETE' });
    await a.request('/admin/v1/policy', { method: 'PUT', body: '{}' });
    await a.request('/admin/v1/boom');
    const got = lines(info.mock.calls);
    expect(got.map((l) => [l.tool, l.status, l.decision, l.stage, l.outcome])).toEqual([
      ['GET /tokens', 200, 'allowed', null, 'ok'],
      ['DELETE /tokens/:jti', 404, 'failed', null, 'not_found'],
      ['PUT /policy', 403, 'denied', 'authority', 'insufficient_scope'],
      ['GET /boom', 500, 'failed', null, 'internal'],
    ]);
    expect(got[0]).toMatchObject({ event: 'call', surface: 'admin', team: 'acme', subject: 'ops', tokenId: 'jti-admin', jobId: null });
    expect(got[0].latencyMs).toBeGreaterThanOrEqual(0);
    const text = JSON.stringify(info.mock.calls);
    expect(text).not.toContain('secret-subject-filter');
    expect(text).not.toContain('jti-of-a-leaked-token');
  });
});
