/**
 * The official conformance scenario `dns-rebinding-protection` (`@modelcontextprotocol/conformance`,
 * pinned) against the real gateway: a request whose Host and Origin name `evil.example.com` must
 * get a 4xx, one with the gateway's own loopback address must be served. The suite has no option
 * for credentials, so a loopback proxy adds a bearer token (proxy.ts); foreign Host values pass
 * through it untouched.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, startGateway, type Gateway } from '../e2e/harness.ts';
import { startAuthProxy, type AuthProxy } from './proxy.ts';

const CLI = join(ROOT, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
interface Check {
  id: string;
  status: string;
  errorMessage?: string;
}

let gw: Gateway;
let proxy: AuthProxy;
let plain: AuthProxy;
let out: string;

beforeAll(async () => {
  gw = await startGateway();
  proxy = await startAuthProxy(gw.url, await gw.token({ team: 'rebinding', scopes: ['execute'] }));
  // The gateway sees the proxy's own port in Host and Origin: still loopback, so a development gateway serves it.
  plain = await startAuthProxy(gw.url, await gw.token({ team: 'rebinding', scopes: ['execute'] }), { rewrite: false });
  out = mkdtempSync(join(tmpdir(), 'gatehouse-rebinding-'));
});
afterAll(async () => {
  await proxy?.close();
  await plain?.close();
  await gw?.stop();
  if (out) rmSync(out, { recursive: true, force: true });
});

function checksIn(dir: string): Check[] {
  const found: Check[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) found.push(...checksIn(p));
    else if (e === 'checks.json') found.push(...(JSON.parse(readFileSync(p, 'utf8')) as Check[]));
  }
  return found;
}

describe('conformance: dns-rebinding-protection', () => {
  for (const [version, via] of [
    ['2025-11-25', 'direct'],
    ['2026-07-28', 'direct'],
    ['2025-11-25', 'another port'],
    ['2026-07-28', 'another port'],
  ] as const) {
    it(`passes at ${version} (${via === 'direct' ? "the gateway's own address" : 'through a loopback proxy on another port'})`, async () => {
      const dir = join(out, version, via.replace(' ', '-'));
      const target = via === 'direct' ? proxy : plain;
      const r = await new Promise<{ code: number; log: string }>((resolve) => {
        const p = spawn(
          process.execPath,
          [CLI, 'server', '--url', `${target.url}/mcp`, '--scenario', 'dns-rebinding-protection', '--spec-version', version, '-o', dir],
          {
            cwd: ROOT,
            env: { ...process.env, NO_COLOR: '1' },
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
        let log = '';
        p.stdout.on('data', (d) => (log += d));
        p.stderr.on('data', (d) => (log += d));
        p.on('close', (code) => resolve({ code: code ?? -1, log }));
      });
      const checks = checksIn(dir);
      expect(checks.map((c) => `${c.id}: ${c.status}`).sort(), `${r.log}\n${JSON.stringify(checks)}`).toEqual([
        'localhost-host-rebinding-rejected: SUCCESS',
        'localhost-host-valid-accepted: SUCCESS',
      ]);
      expect(r.code, r.log).toBe(0);
    }, 120_000);
  }
});
