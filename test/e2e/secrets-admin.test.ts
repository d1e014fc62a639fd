/**
 * Team secrets through the real gateway (wrangler dev): set, list (never a value), replace, remove; a value
 * that cannot be a header is refused without being echoed; the value appears in no answer, audit row or log;
 * a policy binding a secret to a host it does not allow is refused with the path.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Gateway, startGateway } from './harness.ts';

const TEAM = 'acme';
const VALUE = `ghp_${randomBytes(12).toString('hex')}`;
let gw: Gateway;
let admin: (method: string, path: string, body?: unknown) => Promise<{ status: number; text: string }>;

beforeAll(async () => {
  gw = await startGateway({ vars: { GATEHOUSE_SECRETS_KEY: randomBytes(32).toString('base64') } });
  const token = await gw.token({ team: TEAM, scopes: ['admin'] });
  admin = async (method, path, body) => {
    const r = await fetch(`${gw.url}/admin/v1${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, text: await r.text() };
  };
});
afterAll(async () => gw?.stop());

describe('team secrets (admin API)', () => {
  it('sets, lists without values, replaces and removes a secret; the value is in no answer, audit row or log', async () => {
    const put = await admin('PUT', '/secrets/GIT_TOKEN', { value: VALUE });
    expect(put.status).toBe(201);
    expect((await admin('PUT', '/secrets/GIT_TOKEN', { value: `${VALUE}2` })).status).toBe(200);
    const list = await admin('GET', '/secrets');
    expect(list.status).toBe(200);
    expect(JSON.parse(list.text).secrets).toEqual([expect.objectContaining({ name: 'GIT_TOKEN', updated_by: expect.any(String) })]);
    const audit = await admin('GET', '/audit?tool=admin.secret_set');
    expect(audit.text).toContain('GIT_TOKEN');
    expect((await admin('DELETE', '/secrets/GIT_TOKEN')).status).toBe(200);
    const again = await admin('DELETE', '/secrets/GIT_TOKEN');
    expect(again.status).toBe(404);
    expect(JSON.parse(again.text).error.message).toContain('no secret "GIT_TOKEN"');
    for (const t of [put.text, list.text, audit.text, gw.logs()]) expect(t).not.toContain(VALUE);
  });

  it('refuses a value with a line break and a bad name, without echoing the value', async () => {
    const bad = await admin('PUT', '/secrets/T', { value: `${VALUE}\r\nX-Evil: 1` });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('no line break');
    expect(bad.text).not.toContain(VALUE);
    const name = await admin('PUT', '/secrets/1bad', { value: 'x' });
    expect(name.status).toBe(400);
    expect(name.text).toContain('a secret name is');
  });

  it('refuses a policy that binds a secret to a host it does not allow, naming the path', async () => {
    await expect(
      gw.putPolicy(TEAM, {
        version: 1,
        network: { mode: 'allowlist', allow: [{ host: 'registry.example.com' }], credentials: [{ secret: 'T', hosts: ['git.example.com'] }] },
      }),
    ).rejects.toThrow(/network\.credentials\.0\.hosts\.0.*add it to allow/);
  });
});
