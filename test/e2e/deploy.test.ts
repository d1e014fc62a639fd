/**
 * The same code and config deploy to Cloudflare: `wrangler deploy --dry-run` bundles the Worker
 * with its bindings (no network needed), and the D1 migrations apply to an empty database.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './harness.ts';

const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1' };

describe('deployability', () => {
  it('wrangler deploy --dry-run bundles the Worker with D1, R2 and the Durable Object', () => {
    const out = mkdtempSync(join(tmpdir(), 'gatehouse-dist-'));
    const r = spawnSync(WRANGLER, ['deploy', '--dry-run', '--outdir', out], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('env.TEAM_DISPATCHER (TeamDispatcher)');
    expect(r.stdout).toContain('env.DB (gatehouse)');
    expect(r.stdout).toContain('env.ARTIFACTS (gatehouse-artifacts)');
    expect(readdirSync(out)).toContain('index.js');
    rmSync(out, { recursive: true, force: true });
  }, 150_000);

  it('applies every D1 migration to an empty database', () => {
    const state = mkdtempSync(join(tmpdir(), 'gatehouse-mig-'));
    const apply = spawnSync(WRANGLER, ['d1', 'migrations', 'apply', 'DB', '--local', '--persist-to', state], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
    expect(apply.status, apply.stdout + apply.stderr).toBe(0);
    const q = spawnSync(WRANGLER, ['d1', 'execute', 'DB', '--local', '--persist-to', state, '--json', '--command', "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"], { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 });
    expect(q.status, q.stderr).toBe(0);
    const names = (JSON.parse(q.stdout) as { results: { name: string }[] }[])[0].results.map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(['teams', 'tokens', 'revocations', 'agents', 'policies', 'jobs', 'artifacts', 'audit']));
    rmSync(state, { recursive: true, force: true });
  }, 150_000);
});
