/**
 * The `builds` preset: standard plus the package managers, which alone get a network — the
 * package-registries hosts for downloads (GET and HEAD) — and a summary that says install scripts
 * are code running in the sandbox.
 */
import { describe, expect, it } from 'vitest';
import { PACKAGE_MANAGERS, PRESETS } from '../../src/policy/presets.ts';
import { presetHosts } from '../../src/policy/network-presets.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { decide as decideEgress } from '../../executor/egress/decide.ts';
import { run } from './helpers.ts';

const builds = PRESETS.builds.policy;

describe('the builds preset', () => {
  it.each(['npm', 'pnpm', 'yarn', 'pip', 'uv', 'cargo', 'go', 'mvn', 'gradle'])('lets %s run with the package registries as its network', async (pm) => {
    expect(PACKAGE_MANAGERS).toContain(pm);
    const d = await run(builds, pm, 'install');
    expect(d.allowed, d.reason).toBe(true);
    expect(d.effective?.network).toMatchObject({ mode: 'allowlist', unlisted: 'deny', source: 'rules[0].network' });
    expect(d.effective?.network.allow.map((e) => e.host)).toEqual(presetHosts('package-registries'));
  });

  it('allows downloads only: GET and HEAD, so a plain-HTTP upload (npm publish, a PUT) is refused naming the key', async () => {
    const d = await run(builds, 'npm', 'ci');
    const grant = d.effective!.network;
    for (const e of grant.allow) expect(e.methods).toEqual(['GET', 'HEAD']);
    expect(decideEgress(grant, 'registry.npmjs.org', 80, 'GET')).toMatchObject({ allowed: true });
    expect(decideEgress(grant, 'registry.npmjs.org', 80, 'PUT')).toMatchObject({ allowed: false, policyKey: 'rules[0].network.allow[0].methods' });
    expect(decideEgress(grant, 'evil.example.com', 443)).toMatchObject({ allowed: false, policyKey: 'rules[0].network.allow' });
  });

  it('gives every other command no network, as standard does', async () => {
    const d = await run(builds, 'node', 'build.js');
    expect(d.allowed, d.reason).toBe(true);
    expect(d.effective?.network).toMatchObject({ mode: 'off', source: 'network' });
  });

  it('keeps the standard screens and refuses what standard refuses', async () => {
    expect((await run(builds, 'node', '-e', 'require("child_process")')).allowed).toBe(false);
    expect((await run(builds, 'curl', 'https://example.com')).allowed).toBe(false);
    expect(builds.shell.enabled).toBe(DEFAULT_POLICY.shell.enabled);
  });

  it('says what install scripts mean', () => {
    expect(PRESETS.builds.summary).toMatch(/install scripts/);
    expect(PRESETS.builds.summary).toMatch(/inside the sandbox/);
    expect(PRESETS.builds.summary).toMatch(/GET and HEAD/);
  });
});
