/**
 * The egress proxy refuses special-purpose addresses in every spelling (docs/network.md,
 * "Addresses"): the corpus of egress-netns-probe.ts goes through the real proxy, as CONNECT and as
 * plain HTTP, under an `open` grant and under an allowlist that lists every entry, inside a
 * network namespace with only a loopback (`unshare -n`), so a wrong dial can never leave the
 * machine. A listener on that loopback counts what got through: nothing may.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { hasCommand } from '../e2e/harness.ts';
import { CONTROL, FORBIDDEN, LOOPBACK_EXTRA, LOOPBACK_EXTRA6, type ProbeResult } from './egress-netns-probe.ts';

const PROBE = join(import.meta.dirname, 'egress-netns-probe.ts');
const NETNS = hasCommand('unshare', ['-n', 'true']) && hasCommand('unshare', ['-n', 'ip', 'link', 'set', 'lo', 'up']);
if (!NETNS && process.env.CI === 'true') throw new Error('egress-addresses.test.ts: a network namespace (unshare -n, ip) is required under CI=true');
if (!NETNS) console.warn('egress-addresses.test.ts: skipped — cannot make a network namespace here (unshare -n as root; allowed outside CI only)');
const maybe = NETNS ? describe : describe.skip;

/** Runs the probe in a new network namespace whose loopback also holds the corpus's private addresses. */
function probeInNamespace(): Promise<ProbeResult> {
  const setup = [
    'ip link set lo up',
    ...LOOPBACK_EXTRA.map((a) => `ip addr add ${a} dev lo`),
    ...LOOPBACK_EXTRA6.map((a) => `ip -6 addr add ${a} dev lo`),
    'exec "$0" "$1"',
  ].join(' && ');
  return new Promise((resolve, reject) => {
    const p = spawn('unshare', ['-n', 'sh', '-c', setup, process.execPath, PROBE], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => (out += d));
    p.stderr.on('data', (d: Buffer) => (err += d));
    p.on('error', reject);
    p.on('close', (code) => {
      if (code !== 0) return reject(new Error(`the probe exited ${code}: ${err.slice(0, 4000)}`));
      try {
        resolve(JSON.parse(out) as ProbeResult);
      } catch (e) {
        reject(new Error(`the probe's output is not its JSON (${(e as Error).message}): ${out.slice(0, 500)} ${err.slice(0, 2000)}`));
      }
    });
  });
}

maybe('egress: special-purpose addresses in any spelling, through the real proxy in a network namespace', () => {
  let r: ProbeResult;
  beforeAll(async () => {
    r = await probeInNamespace();
  }, 120_000);

  it('the corpus is large enough to mean something, and the listener does count a connection that is allowed', () => {
    expect(FORBIDDEN.length).toBeGreaterThanOrEqual(60);
    // Two grants × (corpus + two port-80 spellings) × (CONNECT + HTTP).
    expect(r.attempts).toHaveLength(2 * (FORBIDDEN.length + 2) * 2);
    expect(r.control.accepted).toBe(1);
  });

  it('no attempt reached the listener: zero connections accepted', () => {
    expect(r.accepted).toBe(0);
  });

  it('every CONNECT is refused before any tunnel, with the address and its range in the reason', () => {
    // An allowlist entry cannot name a zone: under `listed` the zone spelling is refused as unlisted.
    const unlisted = (a: ProbeResult['attempts'][number]) => a.grant === 'listed' && a.host.includes('%') && a.body.includes('not in network.allow');
    const bad = r.attempts.filter((a) => a.via === 'CONNECT' && (a.status !== 403 || !(a.body.includes('private address') || unlisted(a))));
    expect(bad.map((a) => `${a.grant} ${a.host} → ${a.status} ${a.body.slice(0, 200)}`)).toEqual([]);
    for (const f of FORBIDDEN) {
      const a = r.attempts.find((x) => x.via === 'CONNECT' && x.grant === 'open' && x.host.startsWith(`${f.host}:`));
      expect(a?.body, f.host).toContain(f.range);
      expect(a?.body, f.host).toContain('privateAddresses');
    }
  });

  it('every plain HTTP absolute-form request is refused with a reason', () => {
    // A zone id is not valid in a URL: such a request is refused as malformed (400), the others as private (403).
    const bad = r.attempts.filter(
      (a) => a.via === 'HTTP' && !(a.status === 403 && a.body.includes('private address')) && !(a.status === 400 && a.host.includes('%')),
    );
    expect(bad.map((a) => `${a.grant} ${a.host} → ${a.status} ${a.body.slice(0, 200)}`)).toEqual([]);
    for (const f of FORBIDDEN.filter((x) => !x.host.includes('%'))) {
      const a = r.attempts.find((x) => x.via === 'HTTP' && x.grant === 'listed' && x.host.startsWith(`${f.host}:`));
      expect(a?.body, f.host).toContain(f.range);
      expect(a?.body, f.host).toMatch(/network\.allow\[\d+\]\.privateAddresses/);
    }
  });

  it('every refusal is in the audit records as refused', () => {
    expect(r.records.length).toBeGreaterThan(0);
    expect(r.records.filter((x) => x.decision !== 'refused' && x.host !== CONTROL)).toEqual([]);
  });
});
