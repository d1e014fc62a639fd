/**
 * scripts/smoke.ts against a local gateway configured as docs/deploy.md configures staging: a public issuer and
 * audience (https://gatehouse-staging.example.com), reached through a loopback proxy that forwards with that Host as
 * Cloudflare's custom domain does, the signing key made by the deploy block's key line, and the smoke token made by
 * its token line. The smoke line itself runs as written but for its URL. One gateway writes the issuer and audience
 * with a trailing slash, the other without: the token (minted without) passes both.
 *
 * The script must also fail, or a pass would mean nothing: a token of another key is refused at once (no retry
 * until the timeout), and the gateway reached by a host it does not serve fails the check that hits it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { join } from 'node:path';
import { generateSigningKey, mintToken } from '../../src/auth/mint.ts';
import { readmeBlock } from '../cli/readme.ts';
import { ROOT, startGateway, type Gateway } from './harness.ts';

const HOST = 'gatehouse-staging.example.com';
const PUBLIC_URL = `https://${HOST}`;
const LINES = readmeBlock('deploy');
const block = (prefix: string) => {
  const l = LINES.find((x) => x.startsWith(prefix));
  if (!l) throw new Error(`the deploy block of docs/deploy.md has no line starting "${prefix}"`);
  return l;
};

// Inside the repository, so that `npx gatehouse` finds the repository's own package; HOME for ~/.config/gatehouse.
const home = mkdtempSync(join(ROOT, 'node_modules/.cache-smoke-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const env = { ...process.env, HOME: home, CI: 'true', NO_COLOR: '1', PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}` };

/**
 * Runs a shell line without blocking this process: the proxy below lives in it, and a synchronous child would
 * keep it from answering the very requests the child makes.
 */
function sh(cmd: string, cwd = home): Promise<{ status: number | null; out: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    const p = spawn('/bin/sh', ['-ec', cmd], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), 150_000);
    p.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, out, ms: Date.now() - started });
    });
  });
}

async function ok(cmd: string, cwd = home): Promise<string> {
  const r = await sh(cmd, cwd);
  expect(r.status, `${cmd}\n${r.out}`).toBe(0);
  return r.out;
}

/** The smoke line of the block, pointed at `url` (what the block writes as the staging URL). */
const smokeLine = (url: string) => block('GATEHOUSE_SMOKE_TOKEN=').replace(`--url ${PUBLIC_URL}`, `--url ${url}`);

/** A loopback stand-in for the custom domain: forwards every request to the gateway with `Host: <host>`. */
async function hostProxy(target: string, host: string): Promise<{ url: string; server: Server }> {
  const t = new URL(target);
  const server = createServer((req, res) => {
    const up = request({ hostname: t.hostname, port: t.port, path: req.url, method: req.method, headers: { ...req.headers, host } }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server };
}

let signingKey = '';
beforeAll(async () => {
  await ok(block('mkdir -p -m 700 ~/.config/gatehouse'));
  await ok(block('npx gatehouse key generate --out ~/.config/gatehouse/staging-signing-key.json'));
  signingKey = readFileSync(join(home, '.config/gatehouse/staging-signing-key.json'), 'utf8').trim();
  await ok(block('npx gatehouse token bootstrap --team smoke '));
}, 150_000);

for (const slash of ['/', ''] as const) {
  describe(`a gateway configured like staging, issuer ${PUBLIC_URL}${slash}`, () => {
    let gw: Gateway;
    let proxy: { url: string; server: Server };

    beforeAll(async () => {
      gw = await startGateway({
        vars: { GATEHOUSE_SIGNING_KEY: signingKey, GATEHOUSE_ISSUER: `${PUBLIC_URL}${slash}`, GATEHOUSE_AUDIENCE: `${PUBLIC_URL}/mcp${slash}` },
      });
      proxy = await hostProxy(gw.url, HOST);
    }, 180_000);

    afterAll(async () => {
      if (proxy) {
        proxy.server.closeAllConnections();
        await new Promise<void>((r) => proxy.server.close(() => r()));
      }
      await gw?.stop();
    });

    it('passes the smoke test as docs/deploy.md runs it: /healthz, /readyz, MCP initialize and tools/list', async () => {
      const out = await ok(smokeLine(proxy.url), ROOT);
      expect(out).toMatch(/ok {2}GET \/healthz 200/);
      expect(out).toMatch(/ok {2}GET \/readyz 200/);
      expect(out).toMatch(/ok {2}MCP initialize: gatehouse /);
      expect(out).toMatch(/ok {2}MCP tools\/list: \d+ tools/);
      expect(out).toContain('smoke test passed');
    }, 150_000);

    it('fails at once on a token of another signing key, naming the refusal', async () => {
      const stranger = await mintToken({
        privateJwk: await generateSigningKey(),
        issuer: PUBLIC_URL,
        audience: `${PUBLIC_URL}/mcp`,
        team: 'smoke',
        subject: 'smoke-test',
        scopes: ['artifacts:read'],
        ttlSeconds: 3600,
        minter: { kind: 'bootstrap' },
      });
      const r = await sh(`GATEHOUSE_SMOKE_TOKEN='${stranger.token}' npm exec -- node scripts/smoke.ts --url ${proxy.url} --timeout 90`, ROOT);
      expect(r.status, r.out).toBe(1);
      expect(r.out).toMatch(/FAIL the gateway refused GATEHOUSE_SMOKE_TOKEN on \/mcp \(HTTP 401\)/);
      // Not retried for the 90 s of --timeout: a refused token does not get better.
      expect(r.ms).toBeLessThan(30_000);
    }, 150_000);

    it('fails when the gateway is reached by a host it does not serve (421)', async () => {
      const r = await sh(`${smokeLine(gw.url)} --timeout 3`, ROOT);
      expect(r.status, r.out).toBe(1);
      expect(r.out).toMatch(/FAIL .*421/);
    }, 150_000);
  });
}
