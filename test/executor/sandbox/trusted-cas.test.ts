/**
 * Jobs trust what the agent host trusts, plus the agent's `--extra-ca` files: the bundle is
 * composed once, shown read-only in every kind of sandbox (gVisor single-use and reused,
 * bubblewrap, none), and named by the variables every build tool reads; a job spec cannot point
 * them elsewhere, and a file that is not PEM certificates stops the agent at start-up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { composeTrustedCas, pemCertificates, TRUST_ENV_NAMES } from '../../../executor/sandbox/trusted-cas.ts';
import type { SandboxKind } from '../../../src/contracts/agent-protocol.ts';
import { makeRig, requireTool, type Rig } from '../helpers.ts';
import { makePrivateCa, openSslAvailable, type PrivateCa } from '../../support/private-ca.ts';

const ROOT = resolve(import.meta.dirname, '../../..');
const NODE = join(ROOT, 'node_modules/.bin/node');
if (!openSslAvailable() && process.env.CI === 'true') throw new Error('openssl is required under CI=true');
const maybe = openSslAvailable() ? describe : describe.skip;

let ca: PrivateCa;
let dir: string;

maybe('trusted CAs', () => {
  beforeAll(() => {
    ca = makePrivateCa(['localhost', '127.0.0.1']);
    dir = mkdtempSync(join(tmpdir(), 'gh-cas-'));
  });
  afterAll(() => {
    ca?.remove();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('an --extra-ca file', () => {
    it('is taken when it holds PEM certificates', () => {
      const r = pemCertificates(`comment before\n${ca.caPem}`, 'ca.pem');
      expect(r.ok && r.value.length).toBe(1);
    });

    it.each([
      ['a private key', () => readFileSync(join(ca.dir, 'ca.key'), 'utf8'), 'not a certificate'],
      ['an empty file', () => '', 'holds no PEM certificate'],
      ['DER or other text', () => 'hello', 'holds no PEM certificate'],
      ['a certificate block that does not parse', () => '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', 'does not parse'],
    ])('is refused with a clear error when it is %s', (_what, text, why) => {
      const r = pemCertificates(text(), '/etc/x.pem');
      expect(r.ok).toBe(false);
      if (!r.ok) {
        expect(r.error.message).toContain('--extra-ca /etc/x.pem');
        expect(r.error.message).toContain(why);
        expect(r.error.message).toContain('PEM certificates');
      }
    });

    it("is added after the host's bundle", () => {
      const host = join(dir, 'host-bundle.crt');
      writeFileSync(host, '# the host bundle\n');
      const state = mkdtempSync(join(dir, 'state-'));
      const r = composeTrustedCas({ stateDir: state, extraCaFiles: [ca.caFile], hostBundles: ['/nonexistent/bundle', host] });
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      expect(r.value).toMatchObject({ hostBundle: host, extraCount: 1 });
      const text = readFileSync(r.value.hostPath, 'utf8');
      expect(text.indexOf('# the host bundle')).toBe(0);
      expect(text).toContain(ca.caPem.trim().split('\n')[1]);
    });

    it('that is not PEM certificates stops the agent at start-up, naming the file', async () => {
      const bad = join(dir, 'not-a-cert.pem');
      writeFileSync(bad, 'not a certificate\n');
      const p = spawn(
        NODE,
        [join(ROOT, 'executor/main.ts'), '--url', 'http://127.0.0.1:1', '--root', join(dir, 'ws'), '--sandbox', 'none', '--allow-no-isolation', '--extra-ca', bad],
        { cwd: ROOT, env: { ...process.env, GATEHOUSE_AGENT_TOKEN: 't' }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      p.stdout.on('data', (d) => (out += d));
      p.stderr.on('data', (d) => (out += d));
      const code = await new Promise((r) => p.on('exit', r));
      expect(code).toBe(1);
      expect(out).toContain(`--extra-ca ${bad}: it holds no PEM certificate`);
    });
  });

  const kinds: { name: string; kind: SandboxKind; reuse?: boolean }[] = [
    { name: 'none', kind: 'none' },
    { name: 'bwrap', kind: 'bwrap' },
    { name: 'gvisor (single-use)', kind: 'gvisor' },
    { name: 'gvisor (reused)', kind: 'gvisor', reuse: true },
  ];
  for (const k of kinds) {
    const available = requireTool(k.kind);
    (available ? describe : describe.skip)(`a job in ${k.name}`, () => {
      let rig: Rig;
      beforeAll(async () => {
        rig = await makeRig(k.kind, {
          warm: 0,
          extraCaFiles: [ca.caFile],
          ...(k.reuse ? { reuse: { jobs: 50, seconds: 300 } } : {}),
        });
      }, 120_000);
      afterAll(async () => rig?.close());

      it('reads the bundle, private CA included, at the path every trust variable names', async () => {
        // The bundle is larger than the inline output: its end, where the extra CA goes, is enough.
        const script = [`for v in ${TRUST_ENV_NAMES.join(' ')}; do eval "echo $v=\\$$v"; done`, 'tail -c 3000 "$SSL_CERT_FILE"'].join('; ');
        const { exit } = await rig.run({ mode: 'shell', command: script });
        expect(exit.exitCode, exit.stderr).toBe(0);
        const paths = new Set(TRUST_ENV_NAMES.map((n) => new RegExp(`^${n}=(.+)$`, 'm').exec(exit.stdout)?.[1]));
        expect(paths.size).toBe(1);
        expect([...paths][0]).toMatch(/ca-certificates\.crt$/);
        expect(exit.stdout).toContain(ca.caPem.trim().split('\n')[1]);
      });

      it("keeps the agent's bundle when the job spec names another file", async () => {
        const env = Object.fromEntries(TRUST_ENV_NAMES.map((n) => [n, '/tmp/mine.pem']));
        const { exit } = await rig.run({ mode: 'shell', command: `echo "$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $GIT_SSL_CAINFO"`, env });
        expect(exit.stdout).not.toContain('/tmp/mine.pem');
        expect(exit.stdout).toMatch(/ca-certificates\.crt/);
      });

      if (k.kind !== 'none') {
        it('cannot change the bundle (it is read-only inside)', async () => {
          const { exit } = await rig.run({ mode: 'shell', command: 'echo evil >> "$SSL_CERT_FILE" && echo wrote; cat "$SSL_CERT_FILE" | grep -c evil' });
          expect(exit.stdout).not.toContain('wrote');
          expect(exit.stdout.trim()).toBe('0');
        });
      }
    });
  }

  describe('a job without isolation (sandbox none: it has the host network)', () => {
    let rig: Rig;
    let server: Server;
    let port: number;
    beforeAll(async () => {
      rig = await makeRig('none', { warm: 0, extraCaFiles: [ca.caFile] });
      server = createServer({ cert: ca.cert, key: ca.key }, (_req, res) => res.end('private registry says hi'));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      port = (server.address() as { port: number }).port;
    });
    afterAll(async () => {
      await rig?.close();
      await new Promise((r) => server?.close(r));
    });

    it("trusts a server whose certificate the private CA signed (Node's NODE_EXTRA_CA_CERTS, curl's SSL_CERT_FILE)", async () => {
      const node = await rig.run({
        command: 'node',
        args: ['-e', `require('https').get('https://localhost:${port}/', (r) => r.pipe(process.stdout)).on('error', (e) => { console.error(e.code); process.exit(3) })`],
      });
      expect(node.exit.stdout, node.exit.stderr).toBe('private registry says hi');
      const curl = await rig.run({ command: 'curl', args: ['-sS', `https://localhost:${port}/`] });
      expect(curl.exit.stdout, curl.exit.stderr).toBe('private registry says hi');
    });
  });
});
