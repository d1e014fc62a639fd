/**
 * `gatehouse policy presets` and `gatehouse policy preset <name>` against a real gateway: the presets
 * and what each allows, switching the team to one (a new, audited policy version), and a clear error
 * naming the presets for an unknown name.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../e2e/harness.ts';
import { runCli } from '../support/cli.ts';
import { PRESETS } from '../../src/policy/presets.ts';

let gw: Gateway;
let token: string;

beforeAll(async () => {
  gw = await startGateway();
  token = await gw.token({ team: 'presets', scopes: ['admin'], subject: 'preset-admin' });
}, 120_000);
afterAll(async () => {
  await gw?.stop();
});

const cli = (args: string[]) => runCli(gw.url, token, args);

describe('gatehouse policy presets / preset', () => {
  it('lists each preset with what it really allows', async () => {
    const r = await cli(['policy', 'presets']);
    expect(r.code, r.stderr).toBe(0);
    for (const p of Object.values(PRESETS)) {
      expect(r.stdout).toContain(`${p.name}\n  ${p.summary}`);
    }
    const j = JSON.parse((await cli(['policy', 'presets', '--json'])).stdout) as { presets: { name: string }[] };
    expect(j.presets.map((p) => p.name)).toEqual(Object.keys(PRESETS));
  });

  it('switches the team to a preset: a new policy version, audited; an unknown name names the presets', async () => {
    const r = await cli(['policy', 'preset', 'strict']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^stored preset strict: team presets: policy version \d+, set by preset-admin/);
    const got = JSON.parse((await cli(['policy', 'get', '--json'])).stdout) as { policy: unknown; isDefault: boolean };
    expect(got.isDefault).toBe(false);
    expect(got.policy).toEqual(PRESETS.strict.policy);
    const audit = await fetch(`${gw.url}/admin/v1/audit?tool=admin.policy_set`, { headers: { Authorization: `Bearer ${token}` } });
    const rows = ((await audit.json()) as { entries: { command: { preset?: string } }[] }).entries;
    expect(rows.some((e) => e.command?.preset === 'strict')).toBe(true);
    const bad = await cli(['policy', 'preset', 'lenient']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('error (not_found): no preset "lenient"; presets: strict, standard, builds, open');
  });
});
