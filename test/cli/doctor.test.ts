/**
 * `gatehouse agent doctor` as an operator runs it on an agent host, against a real gateway and
 * the real sandbox: a verdict per check, exit 1 when one fails, and the failures a newcomer
 * hits (a token of another gateway, a client token instead of an agent token, a token about to
 * expire, a clock that is off, an unreachable gateway) named as such.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, hasCommand, startGateway, type Gateway } from '../e2e/harness.ts';
import { gatewayChecks, type Check } from '../../executor/doctor.ts';
import { generateSigningKey, mintToken } from '../../src/auth/mint.ts';

const HAVE_RUNSC = hasCommand('runsc', ['--version']);
if (!HAVE_RUNSC && process.env.CI === 'true') throw new Error('runsc is required under CI=true (Debian package runsc)');

let gw: Gateway;
let dir: string;

function doctor(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    const env = { ...process.env };
    delete env.GATEHOUSE_AGENT_TOKEN;
    delete env.GATEHOUSE_AGENT_TOKEN_FILE;
    const p = spawn(process.execPath, [join(ROOT, 'bin/gatehouse.mjs'), 'agent', 'doctor', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => res({ code: code ?? -1, stdout, stderr }));
  });
}

const byName = (checks: Check[], name: string) => checks.find((c) => c.name === name);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gatehouse-doctor-test-'));
  gw = await startGateway();
});
afterAll(async () => {
  await gw?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('gatehouse agent doctor', () => {
  it.skipIf(!HAVE_RUNSC)(
    'passes every check on a good host with a good agent token (token from a file)',
    async () => {
      const file = join(dir, 'agent.token');
      writeFileSync(file, `${await gw.token({ team: 'acme', scopes: ['agent'], subject: 'host-1', ttlSeconds: 30 * 86400 })}\n`, { mode: 0o600 });
      const r = await doctor(['--url', gw.url, '--token-file', file, '--json']);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as { ok: boolean; checks: Check[] };
      expect(out.ok).toBe(true);
      expect(byName(out.checks, 'runsc')).toMatchObject({ verdict: 'ok', detail: expect.stringMatching(/runsc version/) });
      expect(byName(out.checks, 'sandbox')).toMatchObject({ verdict: 'ok', detail: expect.stringMatching(/^gvisor .*a test job ran/) });
      expect(byName(out.checks, 'runtimes')?.detail).toMatch(/visible inside the sandbox: .*shell/);
      expect(byName(out.checks, 'egress')).toMatchObject({ verdict: 'ok', detail: expect.stringContaining('egress proxy') });
      expect(byName(out.checks, 'gateway')?.verdict).toBe('ok');
      expect(byName(out.checks, 'clock')?.verdict).toBe('ok');
      expect(byName(out.checks, 'token')).toMatchObject({ verdict: 'ok', detail: expect.stringContaining('team acme, subject host-1') });
      // The human form: one verdict per line and a last word.
      const text = await doctor(['--url', gw.url, '--token-file', file]);
      expect(text.stdout).toMatch(/^ok +token +accepted by the gateway/m);
      expect(text.stdout.trimEnd().split('\n').at(-1)).toBe('ready: gatehouse agent can run here');
    },
    120_000,
  );

  it('fails an unreachable gateway, and exits 2 on bad flags', async () => {
    const junk = join(dir, 'junk.token');
    writeFileSync(junk, 'x');
    const r = await doctor(['--url', 'http://127.0.0.1:9', '--token-file', junk, '--sandbox', 'none']);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^FAIL +gateway +cannot reach http:\/\/127\.0\.0\.1:9/m);
    expect(r.stdout).toContain('check(s) failed');
    // Sandbox none cannot confine a job's network: the doctor says such jobs are refused here.
    expect(r.stdout).toMatch(/^WARN +egress +jobs with network access are refused: none cannot confine/m);
    const bad = await doctor(['--url', gw.url, '--sandbox', 'docker']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--sandbox must be one of gvisor, bwrap, none');
    const argvToken = await doctor(['--url', gw.url, '--token', 'eyJ.secret.token']);
    expect(argvToken.code).toBe(2);
    expect(argvToken.stderr).toContain('not taken on the command line');
    const unknown = await doctor(['--colour']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown flag "--colour" for "agent doctor"; allowed: --json, --help, --url, --token-file, --sandbox');
  });

  it('names the token problems: another gateway, a client token, about to expire, none at all', async () => {
    const other = await mintToken({
      minter: { kind: 'bootstrap' },
      privateJwk: await generateSigningKey(),
      issuer: gw.issuer,
      audience: gw.audience,
      team: 'acme',
      subject: 'forged',
      scopes: ['agent'],
      ttlSeconds: 3600,
    });
    const forged = byName(await gatewayChecks(gw.url, other.token, Date.now), 'token');
    expect(forged?.verdict).toBe('fail');
    expect(forged?.detail).toMatch(/^refused by the gateway: unauthenticated: /);

    const client = byName(await gatewayChecks(gw.url, await gw.token({ team: 'acme', scopes: ['execute'] }), Date.now), 'token');
    expect(client).toMatchObject({ verdict: 'fail', detail: expect.stringMatching(/^refused by the gateway: insufficient_scope: /) });

    const soon = byName(await gatewayChecks(gw.url, await gw.token({ team: 'acme', scopes: ['agent'], ttlSeconds: 3 * 3600 }), Date.now), 'token');
    expect(soon).toMatchObject({ verdict: 'warn', detail: expect.stringMatching(/expires in [23] h: mint a new one/) });

    expect(byName(await gatewayChecks(gw.url, undefined, Date.now), 'token')?.verdict).toBe('fail');
  });

  describe('clock skew against the Date header of the gateway', () => {
    let fake: Server;
    let url: string;
    let offsetMs = 0;
    beforeAll(async () => {
      // A loopback stand-in whose clock is off by offsetMs (the real gateway's clock is this host's).
      fake = createServer((req, res) => {
        res.sendDate = false;
        res.setHeader('Date', new Date(Date.now() + offsetMs).toUTCString());
        res.statusCode = req.url === '/agent/v1/connect' ? 426 : 200;
        res.end('{}');
      });
      await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
      url = `http://127.0.0.1:${(fake.address() as { port: number }).port}`;
    });
    afterAll(() => new Promise<void>((r) => fake.close(() => r())));

    it('ok within 30 s, a warning past it, a failure past 5 minutes', async () => {
      const token = await gw.token({ team: 'acme', scopes: ['agent'], ttlSeconds: 30 * 86400 });
      offsetMs = 0;
      expect(byName(await gatewayChecks(url, token, Date.now), 'clock')?.verdict).toBe('ok');
      offsetMs = 2 * 60_000;
      expect(byName(await gatewayChecks(url, token, Date.now), 'clock')).toMatchObject({
        verdict: 'warn',
        detail: expect.stringMatching(/behind the gateway: sync it/),
      });
      offsetMs = -20 * 60_000;
      expect(byName(await gatewayChecks(url, token, Date.now), 'clock')).toMatchObject({
        verdict: 'fail',
        detail: expect.stringMatching(/ahead of the gateway/),
      });
    });
  });
});
