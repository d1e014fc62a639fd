/**
 * The same code and config deploy to Cloudflare: every line of the README's deploy block runs here,
 * the ones that need a Cloudflare account in their offline form — `wrangler deploy --dry-run`
 * bundles the Worker with its bindings, the D1 migrations apply to an empty local database, the
 * resources the `create` lines make are the ones wrangler.toml binds — and the signing key and the
 * first admin token are made exactly as written.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeProtectedHeader, importJWK, jwtVerify } from 'jose';
import { ROOT } from './harness.ts';
import { readmeBlock } from '../cli/readme.ts';

const WRANGLER = join(ROOT, 'node_modules/.bin/wrangler');
const env = { ...process.env, WRANGLER_SEND_METRICS: 'false', CI: 'true', NO_COLOR: '1', PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}` };
const TOML = readFileSync(join(ROOT, 'wrangler.toml'), 'utf8');
const LINES = readmeBlock('deploy');
const covered = new Set<string>();
// Inside the repository, so that `npx gatehouse` finds the repository's own package (never the registry).
const work = mkdtempSync(join(ROOT, 'node_modules/.cache-deploy-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The README line that starts with `prefix` (it must exist), marked as run. */
function line(prefix: string): string {
  const l = LINES.find((x) => x.startsWith(prefix));
  if (!l) throw new Error(`the README deploy block has no line starting "${prefix}":\n${LINES.join('\n')}`);
  covered.add(l);
  return l;
}

function sh(cmd: string, cwd = ROOT) {
  const r = spawnSync('/bin/sh', ['-ec', cmd], { cwd, env, encoding: 'utf8', timeout: 120_000 });
  expect(r.status, `${cmd}\n${r.stdout}${r.stderr}`).toBe(0);
  return r.stdout;
}

describe('deployability: the README deploy block', () => {
  it('creates the resources wrangler.toml binds (D1 gatehouse as DB, R2 gatehouse-artifacts, KV OAUTH_KV)', () => {
    expect(line('npx wrangler d1 create ')).toBe('npx wrangler d1 create gatehouse');
    expect(TOML).toMatch(/\[\[d1_databases\]\]\nbinding = "DB"\ndatabase_name = "gatehouse"/);
    expect(line('npx wrangler r2 bucket create ')).toBe('npx wrangler r2 bucket create gatehouse-artifacts');
    expect(TOML).toMatch(/\[\[r2_buckets\]\]\nbinding = "ARTIFACTS"\nbucket_name = "gatehouse-artifacts"/);
    expect(line('npx wrangler kv namespace create ')).toBe('npx wrangler kv namespace create OAUTH_KV');
    expect(TOML).toMatch(/\[\[kv_namespaces\]\]\nbinding = "OAUTH_KV"/);
  });

  it('makes the signing key and the first admin token as written; the token verifies with the key', async () => {
    // The key line runs from the repository (it imports ./src/auth/mint.ts); its output lands in a scratch dir.
    const keyFile = join(work, 'signing-key.json');
    sh(line('npm exec -- node -e ').replace(/> signing-key\.json$/, `> ${keyFile}`));
    const jwk = JSON.parse(readFileSync(keyFile, 'utf8')) as { kty: string; crv: string; d?: string; x: string; y: string; kid?: string };
    expect(jwk).toMatchObject({ kty: 'EC', crv: 'P-256', d: expect.any(String) });
    // `wrangler secret put GATEHOUSE_SIGNING_KEY < signing-key.json` uploads exactly this file (needs an account).
    expect(line('npx wrangler secret put ')).toBe('npx wrangler secret put GATEHOUSE_SIGNING_KEY < signing-key.json');
    const bootstrap = line('npx gatehouse token bootstrap ').replaceAll('<worker>', 'gw.example.com');
    const token = sh(bootstrap, work).trim();
    const { d: _private, ...publicJwk } = jwk;
    const { payload } = await jwtVerify(token, await importJWK({ ...publicJwk, alg: 'ES256' }, 'ES256'), {
      issuer: 'https://gw.example.com',
      audience: 'https://gw.example.com/mcp',
    });
    expect(payload).toMatchObject({ team: 'acme', scope: 'admin', sub: 'bootstrap-admin' });
    expect(decodeProtectedHeader(token).alg).toBe('ES256');
  }, 150_000);

  it('applies every D1 migration (--remote run --local against an empty database)', () => {
    const state = mkdtempSync(join(tmpdir(), 'gatehouse-mig-'));
    sh(line('npx wrangler d1 migrations apply ').replace(' --remote', ` --local --persist-to ${state}`));
    const q = spawnSync(
      WRANGLER,
      ['d1', 'execute', 'DB', '--local', '--persist-to', state, '--json', '--command', "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"],
      { cwd: ROOT, env, encoding: 'utf8', timeout: 120_000 },
    );
    expect(q.status, q.stderr).toBe(0);
    const names = (JSON.parse(q.stdout) as { results: { name: string }[] }[])[0].results.map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(['teams', 'tokens', 'revocations', 'agents', 'policies', 'jobs', 'artifacts', 'audit']));
    rmSync(state, { recursive: true, force: true });
  }, 150_000);

  it('wrangler deploy (--dry-run) bundles the Worker with D1, R2, KV and the Durable Object', () => {
    const out = mkdtempSync(join(tmpdir(), 'gatehouse-dist-'));
    const deploy = line('npx wrangler deploy');
    expect(deploy).toBe('npx wrangler deploy');
    const stdout = sh(`${deploy} --dry-run --outdir ${out}`);
    expect(stdout).toContain('env.TEAM_DISPATCHER (TeamDispatcher)');
    expect(stdout).toContain('env.DB (gatehouse)');
    expect(stdout).toContain('env.ARTIFACTS (gatehouse-artifacts)');
    expect(stdout).toContain('env.OAUTH_KV');
    expect(readdirSync(out)).toContain('index.js');
    rmSync(out, { recursive: true, force: true });
  }, 150_000);

  it('left no line of the block unrun', () => {
    expect(LINES.filter((l) => !covered.has(l))).toEqual([]);
  });
});
