/**
 * Script mode and the platform around it, each against its own `wrangler dev`:
 * - a deployment without the Worker Loader binding answers run_script with an error naming the
 *   binding and the Cloudflare feature it needs;
 * - a script that allocates without bound never returns a result and cannot take the gateway
 *   down for good. On Cloudflare the isolate's 128 MB limit ends only that isolate; local
 *   workerd has no per-isolate memory limit, so V8's heap limit aborts the local runtime, which
 *   wrangler restarts — this test checks that the gateway serves scripts again afterwards.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, startGateway, type Gateway } from './harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';

let gw: Gateway | undefined;
let dir: string | undefined;
afterEach(async () => {
  await gw?.stop();
  gw = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const TEAM = 'plat';

/** The repository's wrangler.toml without the [[worker_loaders]] block, paths made absolute. */
function configWithoutLoader(): string {
  const toml = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8');
  expect(toml).toMatch(/\[\[worker_loaders\]\]\s*\nbinding = "LOADER"/);
  const stripped = toml
    .replace(/\[\[worker_loaders\]\]\s*\nbinding = "LOADER"\s*\n/, '')
    .replace(/^main = "(.+)"$/m, (_m, p: string) => `main = "${join(ROOT, p)}"`)
    .replace(/^migrations_dir = "(.+)"$/m, (_m, p: string) => `migrations_dir = "${join(ROOT, p)}"`)
    .replace(/^directory = "(.+)"$/m, (_m, p: string) => `directory = "${join(ROOT, p)}"`);
  dir = mkdtempSync(join(tmpdir(), 'gatehouse-noloader-'));
  const file = join(dir, 'wrangler.toml');
  writeFileSync(file, stripped);
  return file;
}

describe('deployment', () => {
  it('without the Worker Loader binding, run_script names the binding and the Cloudflare feature', async () => {
    gw = await startGateway({ extraArgs: ['--config', configWithoutLoader()] });
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: { enabled: true } });
    const client = await gw.mcp(TEAM, ['execute']);
    const r = await client.callTool({ name: 'run_script', arguments: { code: 'return 1' } });
    await client.close();
    expect(r.isError).toBe(true);
    const text = (r.content as { text: string }[])[0].text;
    expect(text).toContain('Worker Loader binding "LOADER"');
    expect(text).toContain('[[worker_loaders]]');
    expect(text).toContain('Dynamic Workers');
  }, 180_000);
});

describe('memory', () => {
  it('a memory hog never returns a result, and the gateway serves scripts again afterwards', async () => {
    gw = await startGateway();
    await gw.putPolicy(TEAM, { ...DEFAULT_POLICY, script: { enabled: true } });
    const client = await gw.mcp(TEAM, ['execute']);
    let hog: { isError?: unknown; structuredContent?: unknown } | undefined;
    try {
      hog = (await client.callTool({ name: 'run_script', arguments: { code: 'const a = []; for (;;) a.push(new Array(1e6).fill(1));' } }, undefined, {
        timeout: 120_000,
      })) as typeof hog;
    } catch {
      hog = undefined; // the local runtime aborted under the request: no answer at all
    }
    if (hog) {
      expect(hog.isError).toBe(true);
      expect((hog.structuredContent as { error: { message: string } }).error.message).toMatch(/^Sandbox error: /);
    }
    await client.close().catch(() => undefined);
    // The runtime restarts; within a minute a fresh client runs a script again.
    const deadline = Date.now() + 60_000;
    let result: unknown;
    while (Date.now() < deadline && result !== 6) {
      try {
        const c = await gw.mcp(TEAM, ['execute']);
        const r = await c.callTool({ name: 'run_script', arguments: { code: 'return 2 * 3' } });
        result = (r.structuredContent as { result?: unknown }).result;
        await c.close();
      } catch {
        await new Promise((res) => setTimeout(res, 1000));
      }
    }
    expect(result).toBe(6);
  }, 240_000);
});
