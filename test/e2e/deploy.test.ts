/**
 * The same code and config deploy to Cloudflare: every line of docs/deploy.md's deploy block (staging) runs here,
 * the ones that need a Cloudflare account in their offline form — `wrangler deploy --dry-run --env staging` bundles
 * the Worker with the environment's bindings, the D1 migrations apply to an empty local database, the resources the
 * `create` lines make are the ones `[env.staging]` binds — and the signing key and the tokens are made exactly as
 * written, under a scratch HOME. The smoke-test line runs against a local gateway in test/e2e/smoke.test.ts.
 * Production is documented as the same sequence with `staging` replaced by `production`: that twin is checked too.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader, importJWK, jwtVerify } from 'jose';
import { ROOT } from './harness.ts';
import { readmeBlock } from '../cli/readme.ts';

const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
// Inside the repository, so that `npx gatehouse` finds the repository's own package (never the registry); it is
// also HOME for the block's `~/.config/gatehouse/` files.
const home = mkdtempSync(join(ROOT, 'node_modules/.cache-deploy-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));
const env = {
  ...process.env,
  HOME: home,
  WRANGLER_SEND_METRICS: 'false',
  CI: 'true',
  NO_COLOR: '1',
  PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
};
const TOML = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8');
const LINES = readmeBlock('deploy');
const covered = new Set<string>();
const STAGING_URL = 'https://gatehouse-staging.example.com';
const KEY_FILE = join(home, '.config/gatehouse/staging-signing-key.json');

/** The deploy block's line that starts with `prefix` (it must exist), marked as run. */
function line(prefix: string): string {
  const l = LINES.find((x) => x.startsWith(prefix));
  if (!l) throw new Error(`the deploy block of docs/deploy.md has no line starting "${prefix}":\n${LINES.join('\n')}`);
  covered.add(l);
  return l;
}

function sh(cmd: string, cwd = home) {
  const r = spawnSync('/bin/sh', ['-ec', cmd], { cwd, env, encoding: 'utf8', timeout: 120_000 });
  expect(r.status, `${cmd}\n${r.stdout}${r.stderr}`).toBe(0);
  return r.stdout;
}

/** An environment's own header line, `[env.<name>]` (not one of its tables, not a comment naming it). */
const ENV_HEADER = /^\[env\.\w+\]$/m;

/** The environment's section of wrangler.toml: from `[env.<name>]` to the next environment or the end. */
function section(name: string): string {
  const start = TOML.search(new RegExp(`^\\[env\\.${name}\\]$`, 'm'));
  expect(start, `wrangler.toml has no [env.${name}]`).toBeGreaterThan(0);
  const next = TOML.slice(start + 1).search(ENV_HEADER);
  return next < 0 ? TOML.slice(start) : TOML.slice(start, start + 1 + next);
}

async function verify(token: string, issuer: string) {
  const { d: _private, ...publicJwk } = JSON.parse(readFileSync(KEY_FILE, 'utf8')) as { d: string };
  const { payload } = await jwtVerify(token, await importJWK({ ...publicJwk, alg: 'ES256' }, 'ES256'), { issuer, audience: `${issuer}/mcp` });
  expect(decodeProtectedHeader(token).alg).toBe('ES256');
  return payload;
}

describe('deployability: the deploy block of docs/deploy.md (staging)', () => {
  it('generates the signing key outside the repository, readable by its owner only', () => {
    sh(line('mkdir -p -m 700 ~/.config/gatehouse'));
    sh(line('npx gatehouse key generate --out ~/.config/gatehouse/staging-signing-key.json'));
    expect(statSync(KEY_FILE).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, '.config/gatehouse')).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(KEY_FILE, 'utf8'))).toMatchObject({ kty: 'EC', crv: 'P-256', d: expect.any(String) });
    // `wrangler secret put … < key file` uploads exactly this file (it needs an account).
    expect(line('npx wrangler secret put ')).toBe('npx wrangler secret put GATEHOUSE_SIGNING_KEY --env staging < ~/.config/gatehouse/staging-signing-key.json');
  }, 150_000);

  it('creates the resources [env.staging] binds (D1 as DB, R2 as ARTIFACTS, KV as OAUTH_KV)', () => {
    const staging = section('staging');
    expect(line('npx wrangler d1 create ')).toBe('npx wrangler d1 create gatehouse-staging');
    expect(staging).toMatch(/\[\[env\.staging\.d1_databases\]\]\nbinding = "DB"\ndatabase_name = "gatehouse-staging"\n/);
    expect(line('npx wrangler r2 bucket create ')).toBe('npx wrangler r2 bucket create gatehouse-artifacts-staging');
    expect(staging).toMatch(/\[\[env\.staging\.r2_buckets\]\]\nbinding = "ARTIFACTS"\nbucket_name = "gatehouse-artifacts-staging"\n/);
    // A KV namespace is bound by id; its title only has to be unique in the account.
    expect(line('npx wrangler kv namespace create ')).toBe('npx wrangler kv namespace create gatehouse-oauth-staging');
    expect(staging).toMatch(/\[\[env\.staging\.kv_namespaces\]\]\nbinding = "OAUTH_KV"\nid = /);
  });

  it('applies every D1 migration (--remote run --local against an empty database)', () => {
    const state = mkdtempSync(join(tmpdir(), 'gatehouse-mig-'));
    const migrate = line('npx wrangler d1 migrations apply ');
    expect(migrate).toBe('npx wrangler d1 migrations apply DB --remote --env staging');
    sh(migrate.replace(' --remote', ` --local --persist-to ${state}`), ROOT);
    const q = spawnSync(
      WRANGLER,
      [
        'd1',
        'execute',
        'DB',
        '--env',
        'staging',
        '--local',
        '--persist-to',
        state,
        '--json',
        '--command',
        "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name",
      ],
      { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 },
    );
    expect(q.status, q.stderr).toBe(0);
    const names = (JSON.parse(q.stdout) as { results: { name: string }[] }[])[0].results.map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(['teams', 'tokens', 'revocations', 'agents', 'policies', 'jobs', 'artifacts', 'audit']));
    rmSync(state, { recursive: true, force: true });
  }, 150_000);

  it('wrangler deploy --env staging (--dry-run) bundles the Worker with the environment’s own bindings and vars', () => {
    const out = mkdtempSync(join(tmpdir(), 'gatehouse-dist-'));
    const deploy = line('npx wrangler deploy');
    expect(deploy).toBe('npx wrangler deploy --env staging');
    const stdout = sh(`${deploy} --dry-run --outdir ${out}`, ROOT);
    for (const binding of [
      'env.TEAM_DISPATCHER (TeamDispatcher)',
      'env.DB (gatehouse-staging)',
      'env.ARTIFACTS (gatehouse-artifacts-staging)',
      'env.OAUTH_KV',
      'env.METRICS (gatehouse_metrics)',
      'env.LOADER',
      'env.RL_MCP_TOKEN (300 requests/60s)',
      'env.RL_ADMIN_TEAM (600 requests/60s)',
      `env.GATEHOUSE_ISSUER ("${STAGING_URL}")`,
      `env.GATEHOUSE_AUDIENCE ("${STAGING_URL}`, // wrangler shortens long values in this table
      'env.GATEHOUSE_WORKERS_PLAN ("paid")',
    ]) {
      expect(stdout).toContain(binding);
    }
    expect(section('staging')).toContain(`GATEHOUSE_AUDIENCE = "${STAGING_URL}/mcp"`);
    expect(readdirSync(out)).toContain('index.js');
    rmSync(out, { recursive: true, force: true });
  }, 150_000);

  it('mints the first admin token of team acme as written; it verifies with the key for the staging URL', async () => {
    const bootstrap = line('npx gatehouse token bootstrap --team acme ');
    const payload = await verify(sh(bootstrap).trim(), STAGING_URL);
    expect(payload).toMatchObject({ team: 'acme', scope: 'admin', sub: 'bootstrap-admin' });
  }, 150_000);

  it('mints the smoke-test token: its own team, a scope that runs nothing, 180 days', async () => {
    sh(line('npx gatehouse token bootstrap --team smoke '));
    const token = readFileSync(join(home, '.config/gatehouse/staging-smoke-token'), 'utf8').trim();
    const payload = await verify(token, STAGING_URL);
    expect(payload).toMatchObject({ team: 'smoke', scope: 'artifacts:read', sub: 'smoke-test' });
    expect(decodeJwt(token).exp! - decodeJwt(token).iat!).toBe(180 * 86400);
  }, 150_000);

  it('runs the smoke test with that token from the environment (test/e2e/smoke.test.ts runs this line)', () => {
    expect(line('GATEHOUSE_SMOKE_TOKEN=')).toBe(
      `GATEHOUSE_SMOKE_TOKEN=$(cat ~/.config/gatehouse/staging-smoke-token) npm exec -- node scripts/smoke.ts --url ${STAGING_URL}`,
    );
  });

  it('left no line of the block unrun', () => {
    expect(LINES.filter((l) => !covered.has(l))).toEqual([]);
  });
});

describe('production: the same block with staging replaced by production', () => {
  const twin = (l: string) => l.replaceAll('staging', 'production');

  it('creates the resources [env.production] binds', () => {
    const production = section('production');
    expect(production).toContain(`database_name = "${twin('npx wrangler d1 create gatehouse-staging').split(' ').pop()}"`);
    expect(production).toContain(`bucket_name = "${twin('npx wrangler r2 bucket create gatehouse-artifacts-staging').split(' ').pop()}"`);
    expect(production).toMatch(/\[\[env\.production\.kv_namespaces\]\]\nbinding = "OAUTH_KV"\n/);
  });

  it('wrangler deploy --env production (--dry-run) bundles the Worker with production’s bindings, none of staging’s', () => {
    const out = mkdtempSync(join(tmpdir(), 'gatehouse-dist-'));
    const stdout = sh(`${twin(line('npx wrangler deploy'))} --dry-run --outdir ${out}`, ROOT);
    expect(stdout).toContain('env.DB (gatehouse-production)');
    expect(stdout).toContain('env.ARTIFACTS (gatehouse-artifacts-production)');
    expect(stdout).toContain('env.TEAM_DISPATCHER (TeamDispatcher)');
    expect(stdout).toContain('env.LOADER');
    expect(stdout).not.toContain('staging');
    rmSync(out, { recursive: true, force: true });
  }, 150_000);

  it('gives each environment its own rate-limit namespaces', () => {
    const ids = (name: string) => [...section(name).matchAll(/namespace_id = "(\d+)"/g)].map((m) => m[1]);
    const top = [...TOML.slice(0, TOML.search(ENV_HEADER)).matchAll(/namespace_id = "(\d+)"/g)].map((m) => m[1]);
    const all = [...top, ...ids('staging'), ...ids('production')];
    expect(ids('staging')).toHaveLength(4);
    expect(ids('production')).toHaveLength(4);
    expect(new Set(all).size).toBe(all.length);
  });
});
