import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PolicyDocument } from '../../src/contracts/policy.ts';
import { JobSpec } from '../../src/contracts/agent-protocol.ts';
import { NETWORK_DEFAULT_BYTES_DOWN, NETWORK_DEFAULT_BYTES_UP, NetworkPresetName } from '../../src/contracts/network.ts';
import { grantLine, grantSummary, networkGrant, noNetworkNote, SANDBOX_NOTE } from '../../src/policy/network.ts';
import { NETWORK_PRESETS, presetEntries, presetHosts } from '../../src/policy/network-presets.ts';
import { parsePolicy } from '../../src/policy/parse.ts';
import { PRESETS, PRESET_NAMES } from '../../src/policy/presets.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { run, policy } from './helpers.ts';

/** A policy that lets `npm ci` reach the registries and gives `node` nothing (the example). */
const npmOnly = () =>
  policy({
    executables: { allow: ['npm', 'node', 'git'] },
    network: { mode: 'allowlist', allow: [{ host: 'intranet.example.org', ports: [8443], methods: ['GET'] }], unlisted: 'ask' },
    rules: [
      { pattern: ['npm', 'ci'], decision: 'allow', network: { mode: 'allowlist', presets: ['package-registries'] } },
      { pattern: ['node'], decision: 'allow', network: { mode: 'off' } },
    ],
  });

describe('network in the policy document', () => {
  it('is off by default, with the default byte caps', () => {
    const p = policy();
    expect(p.network).toEqual({
      mode: 'off',
      allow: [],
      presets: [],
      unlisted: 'deny',
      maxBytesUp: NETWORK_DEFAULT_BYTES_UP,
      maxBytesDown: NETWORK_DEFAULT_BYTES_DOWN,
      credentials: [],
    });
    expect(networkGrant(p)).toEqual({
      mode: 'off',
      allow: [],
      unlisted: 'deny',
      maxBytesUp: NETWORK_DEFAULT_BYTES_UP,
      maxBytesDown: NETWORK_DEFAULT_BYTES_DOWN,
      source: 'network',
    });
  });

  it.each(PRESET_NAMES)('the %s preset keeps the network off', (n) => {
    expect(PRESETS[n].policy.network.mode).toBe('off');
    expect(DEFAULT_POLICY.network.mode).toBe('off');
  });

  it('refuses an unknown mode, preset or method, saying what is allowed', () => {
    const mode = parsePolicy({ version: 1, network: { mode: 'everything' } });
    expect(mode.ok).toBe(false);
    if (!mode.ok) expect(mode.error.message).toMatch(/network\.mode.*off.*allowlist.*open/);
    const preset = parsePolicy({ version: 1, network: { mode: 'allowlist', presets: ['all-of-them'] } });
    if (preset.ok) throw new Error('accepted an unknown preset');
    expect(preset.error.message).toMatch(/network\.presets\.0.*package-registries/);
    const method = parsePolicy({
      version: 1,
      rules: [{ pattern: ['curl'], decision: 'allow', network: { mode: 'allowlist', allow: [{ host: 'x.example.org', methods: ['BREW'] }] } }],
    });
    if (method.ok) throw new Error('accepted an unknown method');
    expect(method.error.message).toMatch(/rules\.0\.network\.allow\.0\.methods\.0.*GET/);
    const key = parsePolicy({ version: 1, network: { mode: 'allowlist', hosts: ['x.example.org'] } });
    if (key.ok) throw new Error('accepted an unknown key');
    expect(key.error.message).toMatch(/hosts/);
    expect(key.error.message).toMatch(/allow/);
  });

  it('refuses host patterns that are not a name, a *.suffix wildcard or an IP address', () => {
    for (const host of ['*', 'http://x.example.org', 'x.example.org/path', 'a b.example.org', '*.*.example.org']) {
      const r = parsePolicy({ version: 1, network: { mode: 'allowlist', allow: [{ host }] } });
      expect(r.ok, host).toBe(false);
      if (!r.ok) expect(r.error.message).toMatch(/network\.allow\.0\.host: a host is an exact name/);
    }
    for (const host of ['registry.npmjs.org', '*.example.org', '10.0.0.7', '[::1]', 'localhost']) {
      expect(parsePolicy({ version: 1, network: { mode: 'allowlist', allow: [{ host }] } }).ok, host).toBe(true);
    }
  });

  it('refuses what a schema cannot see: a top-level-domain wildcard, private addresses under a wildcard, ask in open mode, a repeated preset', () => {
    const tld = parsePolicy({ version: 1, network: { mode: 'allowlist', allow: [{ host: '*.com' }] } });
    if (tld.ok) throw new Error('accepted *.com');
    expect(tld.error.message).toContain('network.allow.0.host: the wildcard "*.com" covers a whole top-level domain; allowed: a wildcard under a domain');
    const priv = parsePolicy({
      version: 1,
      rules: [{ pattern: ['x'], decision: 'allow', network: { mode: 'allowlist', allow: [{ host: '*.corp.example', privateAddresses: true }] } }],
    });
    if (priv.ok) throw new Error('accepted private addresses under a wildcard');
    expect(priv.error.message).toContain('rules.0.network.allow.0.privateAddresses: privateAddresses is allowed on an exact host or an IP address only');
    const open = parsePolicy({ version: 1, network: { mode: 'open', unlisted: 'ask' } });
    if (open.ok) throw new Error('accepted ask in open mode');
    expect(open.error.message).toContain('network.unlisted: mode "open" allows every host');
    const twice = parsePolicy({ version: 1, network: { mode: 'allowlist', presets: ['package-registries', 'package-registries'] } });
    if (twice.ok) throw new Error('accepted a repeated preset');
    expect(twice.error.message).toContain('network.presets.1: preset "package-registries" is listed twice');
  });
});

describe('the grant a command gets', () => {
  it("a matching rule's network replaces the team's: npm ci gets the registries, node nothing, others the team's", async () => {
    const p = npmOnly();
    const npm = await run(p, 'npm', 'ci');
    expect(npm.allowed).toBe(true);
    expect(npm.effective?.network).toMatchObject({ mode: 'allowlist', unlisted: 'deny', source: 'rules[0].network' });
    expect(npm.effective?.network.allow).toEqual(presetEntries('package-registries'));
    const node = await run(p, 'node', 'build.js');
    expect(node.effective?.network).toMatchObject({ mode: 'off', allow: [], source: 'rules[1].network' });
    const git = await run(p, 'git', 'status');
    expect(git.effective?.network).toMatchObject({
      mode: 'allowlist',
      unlisted: 'ask',
      source: 'network',
      allow: [{ host: 'intranet.example.org', ports: [8443], methods: ['GET'] }],
    });
  });

  it('a rule without network leaves the team network; a command string decided as argv gets the same grant', async () => {
    const p = policy({
      executables: { allow: ['npm'] },
      network: { mode: 'allowlist', presets: ['package-registries'] },
      rules: [{ pattern: ['npm', 'publish'], decision: 'ask' }],
    });
    const publish = await run(p, 'npm', 'publish');
    expect(publish.ask).toBeDefined();
    expect(publish.effective?.network.source).toBe('network');
    const { decide } = await import('../../src/policy/engine.ts');
    const asString = await decide(p, { tool: 'execute', mode: 'shell', command: 'npm ci', args: [], team: 't', subject: 's' });
    expect(asString.effective?.network).toEqual(networkGrant(p));
  });

  it('expands presets after the policy own entries, without repeating an entry, and keeps the caps', () => {
    const p = policy({
      network: {
        mode: 'allowlist',
        allow: [{ host: 'registry.npmjs.org', methods: ['GET', 'HEAD'] }, { host: 'artifacts.example.org' }],
        presets: ['package-registries'],
        maxBytesUp: 1024,
        maxBytesDown: 2048,
      },
    });
    const g = networkGrant(p);
    expect(g.allow[0]).toEqual({ host: 'registry.npmjs.org', methods: ['GET', 'HEAD'] });
    expect(g.allow[1]).toEqual({ host: 'artifacts.example.org' });
    expect(g.allow.filter((e) => e.host === 'registry.npmjs.org')).toHaveLength(1);
    expect(g.allow.map((e) => e.host).slice(2)).toEqual(presetHosts('package-registries').filter((h) => h !== 'registry.npmjs.org'));
    expect([g.maxBytesUp, g.maxBytesDown]).toEqual([1024, 2048]);
    // The grant travels in the job spec: it must fit the contract the agent parses.
    expect(JobSpec.shape.network.safeParse(g).success).toBe(true);
  });

  it('policy_check shows the grant, and says that sandbox "none" agents cannot enforce it', () => {
    const p = npmOnly();
    const s = grantSummary(p, 0, networkGrant(p, 0));
    expect(s).toMatchObject({ mode: 'allowlist', source: 'rules[0].network', presets: ['package-registries'], unlisted: 'deny', sandbox_note: SANDBOX_NOTE });
    expect(s.hosts).toContain('registry.npmjs.org GET HEAD');
    expect(s.hosts).toContain('github.com GET HEAD POST');
    expect(grantLine(s)).toMatch(/^network: allowlist \(rules\[0\]\.network\): \d+ host entries \(presets package-registries\); unlisted hosts: deny/);
    expect(grantLine(s)).toContain('sandbox gvisor or bwrap');
    const floored = PolicyDocument.parse({ ...p, sandbox: { minimum: 'gvisor' } });
    expect(grantSummary(floored, 0, networkGrant(floored, 0)).sandbox_note).toBeUndefined();
    const off = grantSummary(p, 1, networkGrant(p, 1));
    expect(grantLine(off)).toBe('network: off (rules[1].network): the job gets no network');
    expect(off.sandbox_note).toBeUndefined();
  });
});

describe('a failed job without network says why', () => {
  it('names the policy key when the job failed with network off, and says nothing otherwise', () => {
    const p = npmOnly();
    expect(noNetworkNote(networkGrant(p, 1), true)).toEqual([
      'the job had no network: rules[1].network.mode is "off" in the team policy; to let it reach hosts, set rules[1].network (docs/network.md)',
    ]);
    expect(noNetworkNote(networkGrant(p, 1), false)).toEqual([]);
    expect(noNetworkNote(networkGrant(p, 0), true)).toEqual([]);
    expect(noNetworkNote(undefined, true)).toEqual([]);
  });
});

describe('the package-registries preset', () => {
  it('lists the registries and code hosts builds download from, reads only except git fetch', () => {
    const hosts = presetHosts('package-registries');
    for (const h of [
      'registry.npmjs.org',
      'pypi.org',
      'files.pythonhosted.org',
      'crates.io',
      'static.crates.io',
      'index.crates.io',
      'proxy.golang.org',
      'sum.golang.org',
      'repo.maven.apache.org',
      'rubygems.org',
      'deb.debian.org',
      'security.debian.org',
      'archive.ubuntu.com',
      'security.ubuntu.com',
      'github.com',
      'codeload.github.com',
      'objects.githubusercontent.com',
      'gitlab.com',
    ])
      expect(hosts, h).toContain(h);
    expect(new Set(hosts).size).toBe(hosts.length);
    for (const e of presetEntries('package-registries')) {
      expect(e.host.startsWith('*.'), `${e.host} is exact`).toBe(false);
      expect(e.ports).toBeUndefined();
      const writes = (e.methods ?? []).filter((m) => m !== 'GET' && m !== 'HEAD');
      expect(writes, e.host).toEqual(['github.com', 'gitlab.com'].includes(e.host) ? ['POST'] : []);
    }
  });

  it('docs/network.md lists exactly the hosts of every preset, with their methods', () => {
    const doc = readFileSync(new URL('../../docs/network.md', import.meta.url), 'utf8');
    for (const name of NetworkPresetName.options) {
      const start = doc.indexOf(`<!-- preset:${name} -->`);
      const end = doc.indexOf(`<!-- /preset:${name} -->`);
      expect(start, `docs/network.md has the ${name} block`).toBeGreaterThan(0);
      const block = doc.slice(start, end);
      const listed = [...block.matchAll(/^\| (.+?) \| (.+?) \| (.+?) \|$/gm)].slice(2).map((m) => [m[1], m[2], m[3]]);
      expect(listed).toEqual(NETWORK_PRESETS[name].groups.map((g) => [g.what, g.hosts.map((h) => `\`${h}\``).join(', '), g.methods.join(', ')]));
    }
  });
});
