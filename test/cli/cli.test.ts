/**
 * The `gatehouse` CLI as a user runs it (`node bin/gatehouse.mjs ...`) against a real gateway:
 * tokens, offline bootstrap, policy, audit; usage errors exit 2, gateway errors exit 1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ROOT, startGateway, type Gateway } from '../e2e/harness.ts';
import { DEFAULT_POLICY } from '../../src/policy/default-policy.ts';
import { auditInsertSql, execSql } from '../admin/seed.ts';
import { promisify } from 'node:util';
import { readmeBlock } from './readme.ts';

/** Every command of the CLI (what `gatehouse --help` lists): each takes --help and --json. */
const EVERY_COMMAND = [
  'token create',
  'token list',
  'token revoke',
  'token bootstrap',
  'key generate',
  'key rotate',
  'policy get',
  'policy set',
  'policy check',
  'policy presets',
  'policy preset',
  'audit tail',
  'audit export',
  'audit egress',
  'audit storage',
  'agents',
  'jobs list',
  'jobs show',
  'jobs kill',
  'oauth grants',
  'oauth revoke',
  'oauth revoke-client',
  'oauth unblock-client',
  'members list',
  'members invite',
  'members withdraw',
  'members role',
  'members remove',
  'approvals list',
  'approvals show',
  'approvals approve',
  'approvals deny',
  'scripts push',
  'scripts list',
  'scripts versions',
  'scripts show',
  'scripts rm',
  'secrets set',
  'secrets list',
  'secrets rm',
  'servers add',
  'servers list',
  'servers rm',
  'workspaces list',
  'workspaces rm',
  'team create',
  'team list',
  'team show',
  'team suspend',
  'team resume',
  'team quotas',
  'team usage',
  'team delete',
  'agent',
  'agent doctor',
];

let gw: Gateway;
let adminToken: string;
let dir: string;
const BASE = Date.now() - 600_000;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `gatehouse <args>` as a user runs it (bin/gatehouse.mjs); `script` runs another entry (node <script...>) instead. */
function cli(
  args: string[],
  o: { env?: Record<string, string | undefined>; stdin?: string; token?: string } = {},
  script = [join(ROOT, 'bin/gatehouse.mjs')],
): Promise<Run> {
  return new Promise((res) => {
    const env: NodeJS.ProcessEnv = { ...process.env, GATEHOUSE_URL: gw.url, GATEHOUSE_ADMIN_TOKEN: o.token ?? adminToken, ...o.env };
    for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
    const p = spawn(process.execPath, [...script, ...args], { cwd: dir, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.stdin.end(o.stdin ?? '');
    p.on('close', (code) => res({ code: code ?? -1, stdout, stderr }));
  });
}

const authGet = (path: string, token: string) => fetch(`${gw.url}${path}`, { headers: { Authorization: `Bearer ${token}` } });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'gatehouse-cli-'));
  gw = await startGateway({
    beforeStart: async (persist) =>
      execSql(
        persist,
        auditInsertSql(
          Array.from({ length: 6 }, (_, i) => ({
            at: BASE + i * 1000,
            team: 'acme',
            subject: 'seeder',
            tool: 'execute',
            decision: i % 2 ? 'denied' : 'allowed',
            command: { mode: 'argv', command: 'echo', args: [`seeded-${i}`] },
            reason: `seed reason ${i}`,
          })),
        ),
      ),
  });
  adminToken = await gw.token({ team: 'acme', scopes: ['admin'], subject: 'cli-admin' });
});
afterAll(async () => {
  await gw?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('usage', () => {
  it('prints help and version', async () => {
    const h = await cli(['--help']);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain('gatehouse token create');
    const v = await cli(['--version']);
    const pkgVersion = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;
    expect(v.stdout.trim()).toBe(pkgVersion);
    const vj = await cli(['--version', '--json']);
    expect(JSON.parse(vj.stdout)).toEqual({ version: pkgVersion, node: expect.stringMatching(/^v22\./) });
    const bad = await cli(['--version', '--jsn']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('takes no arguments but --json; got "--jsn"');
    // Every command `gatehouse --help` names, and every subcommand of it, has its own help that lists --json.
    const named = new Set<string>();
    for (const line of h.stdout.split('\n')) {
      const m = /^\s+gatehouse ([a-z]+)(?: ([a-z-]+))?(.*)$/.exec(line);
      if (!m) continue;
      named.add(m[2] && !m[2].startsWith('-') ? `${m[1]} ${m[2]}` : m[1]);
      for (const alt of m[3].matchAll(/\| ([a-z][a-z-]*)/g)) named.add(`${m[1]} ${alt[1]}`);
    }
    expect([...named].sort()).toEqual([...EVERY_COMMAND].sort());
    const cases = [
      ...EVERY_COMMAND,
      'token',
      'key',
      'members',
      'oauth',
      'policy',
      'audit',
      'jobs',
      'approvals',
      'scripts',
      'secrets',
      'servers',
      'workspaces',
      'team',
    ].flatMap((c) => ['--help', '-h'].map((flag) => ({ c, flag })));
    // The admin commands' help from one Node process (the CLI's own main; a start-up apiece would cost a minute);
    // the agent's through bin/gatehouse.mjs, which starts it without the admin CLI.
    const noGateway = { env: { GATEHOUSE_URL: undefined, GATEHOUSE_ADMIN_TOKEN: undefined } };
    const isAgent = (c: string) => c === 'agent' || c.startsWith('agent ');
    const admin = cases.filter(({ c }) => !isAgent(c)).map(({ c, flag }) => [...c.split(' '), flag]);
    const ran = await cli([], noGateway, [join(ROOT, 'test/cli/help-runner.ts'), JSON.stringify(admin)]);
    expect(ran.code, ran.stderr).toBe(0);
    const results = new Map<string, Run>((JSON.parse(ran.stdout) as (Run & { argv: string[] })[]).map((r) => [r.argv.join(' '), r]));
    for (const { c, flag } of cases.filter(({ c }) => isAgent(c))) results.set(`${c} ${flag}`, await cli([...c.split(' '), flag], noGateway));
    for (const { c, flag } of cases) {
      const r = results.get(`${c} ${flag}`);
      if (!r) throw new Error(`no help run for ${c} ${flag}`);
      expect(r.code, `${c} ${flag}: ${r.stderr}`).toBe(0);
      expect(r.stdout, `${c} ${flag}`).toMatch(/usage/);
      if (EVERY_COMMAND.includes(c)) expect(r.stdout, `${c} ${flag}`).toMatch(/--json\b/);
    }
    // The agent's help names the command a user types, not a file in the repository.
    const agent = await cli(['agent', '--help']);
    expect(agent.code).toBe(0);
    expect(agent.stdout).toContain('usage: gatehouse agent --url URL');
    expect(agent.stdout).not.toContain('executor/main.ts');
  }, 180_000);

  it('exits 2 on an unknown command or flag, listing what is allowed', async () => {
    const c = await cli(['frobnicate']);
    expect(c.code).toBe(2);
    expect(c.stderr).toContain(
      'unknown command "frobnicate"; allowed: token, key, members, oauth, policy, audit, agents, jobs, approvals, scripts, secrets, servers, workspaces, team, agent, help',
    );
    const f = await cli(['token', 'list', '--colour']);
    expect(f.code).toBe(2);
    expect(f.stderr).toMatch(/unknown flag "--colour" for "token list"; allowed: --url, --token/);
    const v = await cli(['token', 'create', '--scope']);
    expect(v.code).toBe(2);
    expect(v.stderr).toContain('--scope needs a value');
    const j = await cli(['jobs', 'frob']);
    expect(j.code).toBe(2);
    expect(j.stderr).toContain('allowed: list, show, kill');
    const s = await cli(['token', 'mint']);
    expect(s.code).toBe(2);
    expect(s.stderr).toContain('allowed: create, list, revoke, bootstrap');
  });

  it('takes an id that starts with "-" after "--", and says so when it is given as a flag', async () => {
    // OAuth client and grant ids are random over A-Za-z0-9-_: one in 64 starts with "-".
    const f = await cli(['oauth', 'revoke-client', '-Dq7xYdz0aa1bb2cc']);
    expect(f.code).toBe(2);
    expect(f.stderr).toContain('a value that starts with "-" goes after "--", e.g. gatehouse oauth revoke-client -- -Dq7xYdz0aa1bb2cc');
    // After "--" it is the id: the gateway is asked, and answers that the team has no such client.
    const r = await cli(['oauth', 'revoke', '--', '-Dq7xYdz0aa1bb2cc']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^error \(not_found\): .*-Dq7xYdz0aa1bb2cc/);
  });

  it('exits 2 without a gateway URL or token', async () => {
    const r = await cli(['token', 'list'], { env: { GATEHOUSE_URL: undefined } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('pass --url or set GATEHOUSE_URL');
    const t = await cli(['token', 'list'], { env: { GATEHOUSE_ADMIN_TOKEN: undefined } });
    expect(t.code).toBe(2);
    expect(t.stderr).toContain('GATEHOUSE_ADMIN_TOKEN');
  });

  it('refuses an unknown scope before calling the gateway', async () => {
    const r = await cli(['token', 'create', '--scope', 'root']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown scope "root"; allowed: execute, artifacts:read, admin, agent');
  });
});

describe('tokens', () => {
  it('creates, lists and revokes a token', async () => {
    const c = await cli([
      'token',
      'create',
      '--team',
      'acme',
      '--scope',
      'execute',
      '--scope',
      'artifacts:read',
      '--subject',
      'ci-bot',
      '--ttl',
      '2d',
      '--note',
      'nightly',
    ]);
    expect(c.code, c.stderr).toBe(0);
    const token = c.stdout.trim();
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({ team: 'acme', sub: 'ci-bot', scope: 'execute artifacts:read' });
    expect(claims.exp! - claims.iat!).toBe(2 * 86400);
    expect(c.stderr).toContain(`created token ${claims.jti}`);
    // Valid at the gateway (execute only: the admin API says 403, not 401).
    expect((await authGet('/admin/v1/tokens', token)).status).toBe(403);

    const l = await cli(['token', 'list']);
    expect(l.code).toBe(0);
    // Minted with a bootstrap token: the list says so, and what a member-minted token would end with.
    expect(l.stdout).toMatch(new RegExp(`${claims.jti}\\s+ci-bot\\s+execute artifacts:read.*active\\s+bootstrap \\(signing key\\)\\s+nightly`));
    expect(l.stderr).toContain('a token a member minted ends when they leave the team or lose the role it needs');
    const lj = JSON.parse((await cli(['token', 'list', '--json'])).stdout) as { tokens: { jti: string }[] };
    expect(lj.tokens.map((t) => t.jti)).toContain(claims.jti);

    const r = await cli(['token', 'revoke', String(claims.jti)]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`revoked ${claims.jti} at `);
    expect((await authGet('/admin/v1/tokens', token)).status).toBe(401);
    expect((await cli(['token', 'list'])).stdout).toMatch(new RegExp(`${claims.jti}.*revoked`));
  });

  it('prints gateway errors as "error (code): message" and exits 1', async () => {
    const r = await cli(['token', 'create', '--team', 'globex', '--scope', 'execute']);
    expect(r.code).toBe(1);
    expect(r.stderr.trim()).toBe('error (not_found): team "globex" not found');
    const u = await cli(['token', 'list'], { token: await gw.token({ team: 'acme', scopes: ['execute'] }) });
    expect(u.code).toBe(1);
    expect(u.stderr).toMatch(/^error \(insufficient_scope\): /);
    const d = await cli(['token', 'list', '--url', 'http://127.0.0.1:9']);
    expect(d.code).toBe(1);
    expect(d.stderr).toMatch(/^error \(unreachable\): cannot reach http:\/\/127\.0\.0\.1:9/);
  });

  it('bootstraps an admin token offline from a .dev.vars or JWK file, and the gateway accepts it', async () => {
    const devVars = join(dir, '.dev.vars');
    writeFileSync(devVars, `HEARTBEAT_MS=1000\nGATEHOUSE_SIGNING_KEY='${gw.signingKey}'\n`);
    const jwkFile = join(dir, 'signing-key.json');
    writeFileSync(jwkFile, gw.signingKey);
    for (const keyFile of [devVars, jwkFile]) {
      const b = await cli(['token', 'bootstrap', '--team', 'acme', '--key-file', keyFile, '--issuer', gw.issuer, '--audience', gw.audience], {
        env: { GATEHOUSE_URL: undefined, GATEHOUSE_ADMIN_TOKEN: undefined },
      });
      expect(b.code, b.stderr).toBe(0);
      const token = b.stdout.trim();
      const who = await authGet('/admin/v1/whoami', token);
      expect(who.status).toBe(200);
      expect(await who.json()).toMatchObject({ team: 'acme', subject: 'bootstrap-admin', scopes: ['admin'] });
      // Not recorded (offline), but revocable by jti.
      const jti = String(decodeJwt(token).jti);
      expect(b.stderr).toContain(`gatehouse token revoke ${jti} --unrecorded`);
      expect((await cli(['token', 'revoke', jti, '--unrecorded'])).code).toBe(0);
      expect((await authGet('/admin/v1/whoami', token)).status).toBe(401);
    }
  });

  it('bootstrap derives issuer and audience from --url and refuses a missing key', async () => {
    const jwkFile = join(dir, 'k.json');
    writeFileSync(jwkFile, gw.signingKey);
    const b = await cli(['token', 'bootstrap', '--team', 'acme', '--key-file', jwkFile, '--url', gw.url, '--scope', 'execute', '--json']);
    expect(b.code, b.stderr).toBe(0);
    const out = JSON.parse(b.stdout) as { token: string; issuer: string; audience: string; scopes: string[] };
    expect(out).toMatchObject({ issuer: gw.url, audience: `${gw.url}/mcp`, scopes: ['execute'] });
    expect((await authGet('/admin/v1/whoami', out.token)).status).toBe(403);
    const missing = await cli(['token', 'bootstrap', '--team', 'acme', '--key-file', join(dir, 'nope.json'), '--url', gw.url]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read --key-file');
  });
});

describe('policy', () => {
  it('gets the default policy, sets one from a file and from stdin, refuses an invalid one', async () => {
    const g = await cli(['policy', 'get']);
    expect(g.code).toBe(0);
    expect(JSON.parse(g.stdout)).toEqual(DEFAULT_POLICY);
    expect(g.stderr).toContain('default policy');

    const file = join(dir, 'policy.json');
    writeFileSync(file, JSON.stringify({ ...DEFAULT_POLICY, shell: { enabled: true, allow: ['ls'] } }));
    const s = await cli(['policy', 'set', file]);
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toContain('policy version 1, set by cli-admin');
    const s2 = await cli(['policy', 'set', '-'], { stdin: JSON.stringify(DEFAULT_POLICY) });
    expect(s2.code, s2.stderr).toBe(0);
    expect(s2.stdout).toContain('policy version 2');
    const gj = JSON.parse((await cli(['policy', 'get', '--json'])).stdout);
    expect(gj).toMatchObject({ team: 'acme', version: 2, isDefault: false, updatedBy: 'cli-admin' });

    writeFileSync(file, JSON.stringify({ ...DEFAULT_POLICY, limits: { ...DEFAULT_POLICY.limits, maxTimeoutMs: -5 } }));
    const bad = await cli(['policy', 'set', file]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^error \(invalid_argument\): invalid policy: .*limits\.maxTimeoutMs/);
    writeFileSync(file, '{not json');
    expect((await cli(['policy', 'set', file])).code).toBe(1);
  });

  it('checks commands: exit 0 when allowed, 1 when denied', async () => {
    const ok = await cli(['policy', 'check', '--', 'git', 'status']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^allowed \(/);
    const no = await cli(['policy', 'check', '--', 'curl', 'http://example.com']);
    expect(no.code).toBe(1);
    expect(no.stdout).toMatch(/^denied \(.*curl/);
    const shell = await cli(['policy', 'check', '--shell', 'ls | wc -l']);
    expect(shell.code).toBe(1);
    expect(shell.stdout).toMatch(/^denied/);
    const none = await cli(['policy', 'check']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('nothing to check');
  });

  it('takes --team on every admin command: its own team works, another is "not found"', async () => {
    const ok = await cli(['policy', 'check', '--team', 'acme', '--', 'git', 'status']);
    expect(ok.code, ok.stderr).toBe(0);
    const other = await cli(['audit', 'tail', '--team', 'globex']);
    expect(other.code).toBe(1);
    expect(other.stderr.trim()).toBe('error (not_found): team "globex" not found');
  });
});

describe('audit', () => {
  it('tails the newest rows oldest first, with filters', async () => {
    // --subject: the admin actions of the tests above (token create, policy set) are audited rows too.
    const t = await cli(['audit', 'tail', '--limit', '3', '--subject', 'seeder']);
    expect(t.code, t.stderr).toBe(0);
    const lines = t.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toContain('echo seeded-3');
    expect(lines[2]).toMatch(/denied\s+execute\s+seeder\s+echo seeded-5\s+— seed reason 5/);
    const d = await cli(['audit', 'tail', '--decision', 'denied', '--json']);
    const rows = d.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { decision: string });
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(rows.every((r) => r.decision === 'denied')).toBe(true);
    const bad = await cli(['audit', 'tail', '--decision', 'maybe']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('error (invalid_argument): decision must be one of allowed, denied, failed');
  });

  it('follows new rows until interrupted', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, GATEHOUSE_URL: gw.url, GATEHOUSE_ADMIN_TOKEN: adminToken };
    const p = spawn(process.execPath, [join(ROOT, 'bin/gatehouse.mjs'), 'audit', 'tail', '--limit', '1', '--follow', '--interval', '200'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    const waitFor = async (re: RegExp) => {
      const until = Date.now() + 15_000;
      while (!re.test(out)) {
        if (Date.now() > until) throw new Error(`no ${re} in:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    // The newest row when it starts (an audited admin action of the tests above, or the last seeded row).
    await waitFor(/\n/);
    const first = out.split('\n')[0];
    // A new audit row: an MCP policy_check call (audited like every tool call).
    const client = new Client({ name: 'cli-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(gw.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${await gw.token({ team: 'acme', scopes: ['execute'], subject: 'mcp-user' })}` } },
      }),
    );
    await client.callTool({ name: 'policy_check', arguments: { command: 'git', args: ['log'] } });
    await client.close();
    await waitFor(/policy_check\s+mcp-user\s+git log/);
    const exited = new Promise<number | null>((r) => p.on('close', (c) => r(c)));
    p.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(out.split('\n').filter((l) => l === first)).toHaveLength(1);
  });

  it('exports the whole trail as NDJSON as docs/retention.md says, then only what is new after the cursor', async () => {
    const [first, again] = readmeBlock('audit-export');
    const cwd = mkdtempSync(join(ROOT, 'node_modules/.cache-export-'));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      GATEHOUSE_URL: gw.url,
      GATEHOUSE_ADMIN_TOKEN: adminToken,
    };
    const sh = promisify(execFile);
    try {
      const one = await sh('/bin/sh', ['-ec', first], { cwd, env });
      const rows = readFileSync(join(cwd, 'audit.ndjson'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: number; reason: string | null });
      // The seeded rows (moved from D1 into the team's object) and everything since, oldest first, each once.
      expect(rows.map((r) => r.reason).filter((r) => r?.startsWith('seed reason'))).toEqual([
        'seed reason 0',
        'seed reason 1',
        'seed reason 2',
        'seed reason 3',
        'seed reason 4',
        'seed reason 5',
      ]);
      expect(rows.map((r) => r.id)).toEqual([...rows.map((r) => r.id)].sort((a, b) => a - b));
      const next = /(\d+) rows; next: (\d+)/.exec(one.stderr);
      expect(Number(next?.[1])).toBe(rows.length);
      expect(Number(next?.[2])).toBe(rows.at(-1)!.id);
      // One new row, then the second line appends only it.
      const t = await cli(['token', 'create', '--subject', 'export-probe', '--scope', 'execute']);
      expect(t.code, t.stderr).toBe(0);
      await sh('/bin/sh', ['-ec', again], { cwd, env: { ...env, NEXT: next![2] } });
      const all = readFileSync(join(cwd, 'audit.ndjson'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: number; tool: string });
      expect(all.length).toBe(rows.length + 1);
      expect(all.at(-1)!.tool).toBe('admin.token_create');
      const st = await cli(['audit', 'storage']);
      expect(st.code, st.stderr).toBe(0);
      expect(st.stdout).toMatch(/^storage\s+[\d.]+ MB of 1073\.7 MB \(policy retention\.maxBytes\)/);
      expect(st.stdout).toContain('audit kept     90 days');
      const bad = await cli(['audit', 'export', '--since', 'yesterday']);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toContain('since must be milliseconds since the epoch or an ISO 8601 date');
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});

describe('README', () => {
  it('runs the admin CLI lines of the README as written (team dev, as npm start mints)', async () => {
    const lines = readmeBlock('cli-admin');
    expect(lines[0]).toMatch(/^export GATEHOUSE_URL=/);
    // npx finds the repository's own package from a directory inside it; files land in a scratch dir.
    const cwd = mkdtempSync(join(ROOT, 'node_modules/.cache-readme-'));
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      GATEHOUSE_URL: gw.url,
      GATEHOUSE_ADMIN_TOKEN: await gw.token({ team: 'dev', scopes: ['admin'], subject: 'dev-admin' }),
    };
    const sh = promisify(execFile);
    try {
      for (const line of lines.slice(1)) {
        try {
          await sh('/bin/sh', ['-ec', line], { cwd, env });
        } catch (e) {
          const x = e as { stdout?: string; stderr?: string; message: string };
          throw new Error(`README line failed: ${line}\n${x.message}\n${x.stdout ?? ''}${x.stderr ?? ''}`);
        }
        if (line.includes('> ci-bot.token')) {
          const claims = decodeJwt(readFileSync(join(cwd, 'ci-bot.token'), 'utf8').trim());
          expect(claims).toMatchObject({ team: 'dev', sub: 'ci-bot', scope: 'execute artifacts:read' });
          env.JTI = String(claims.jti);
        }
      }
      expect(JSON.parse(readFileSync(join(cwd, 'policy.json'), 'utf8'))).toEqual(DEFAULT_POLICY);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('--json on every admin command', () => {
  it('prints one JSON document per command (tokens, policy, approvals; agents and jobs in jobs.test.ts, audit above)', async () => {
    // A team of its own, so the versions and rows the tests above count stay theirs.
    const token = await gw.token({ team: 'jsonteam', scopes: ['admin'], subject: 'json-admin' });
    const json = async (args: string[], o: { stdin?: string; code?: number } = {}) => {
      // Before `--`: everything after it is the command being checked.
      const at = args.includes('--') ? args.indexOf('--') : args.length;
      const r = await cli([...args.slice(0, at), '--json', ...args.slice(at)], { token, stdin: o.stdin });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(o.code ?? 0);
      try {
        return JSON.parse(r.stdout) as Record<string, any>;
      } catch {
        throw new Error(`${args.join(' ')} --json printed no JSON:\n${r.stdout}`);
      }
    };
    const created = await json(['token', 'create', '--scope', 'execute', '--subject', 'json-bot']);
    expect(created).toMatchObject({ team: 'jsonteam', subject: 'json-bot', scopes: ['execute'] });
    expect(decodeJwt(created.token).jti).toBe(created.jti);
    expect((await json(['token', 'list'])).tokens.map((t: { jti: string }) => t.jti)).toContain(created.jti);
    expect(await json(['token', 'revoke', created.jti])).toMatchObject({ jti: created.jti, revokedAt: expect.any(Number) });

    const policy = { ...DEFAULT_POLICY, rules: [{ pattern: ['echo', 'ask-me'], decision: 'ask', reason: 'a person decides' }] };
    expect(await json(['policy', 'set', '-'], { stdin: JSON.stringify(policy) })).toMatchObject({ team: 'jsonteam', version: 1, isDefault: false });
    expect((await json(['policy', 'get'])).policy.rules).toEqual(policy.rules);
    // Exit 3: needs approval (the JSON says the same).
    expect(await json(['policy', 'check', '--', 'echo', 'ask-me'], { code: 3 })).toMatchObject({ allowed: false, decision: 'ask', stage: 'rules' });

    // Two runs the rule asks about (a 2025-era client gets an approval id), one approved and one denied.
    const client = new Client({ name: 'cli-json', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(gw.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${await gw.token({ team: 'jsonteam', scopes: ['execute'], subject: 'asker' })}` } },
      }),
    );
    const ask = async (word: string) => {
      const r = await client.callTool({ name: 'execute', arguments: { command: 'echo', args: ['ask-me', word] } });
      const id = (r.structuredContent as { approval?: { id: string } }).approval?.id;
      if (!id) throw new Error(`no approval id in ${JSON.stringify(r)}`);
      return id;
    };
    const [first, second] = [await ask('one'), await ask('two')];
    await client.close();
    expect((await json(['approvals', 'list', '--status', 'pending'])).approvals.map((a: { id: string }) => a.id).sort()).toEqual([first, second].sort());
    expect((await json(['approvals', 'show', first])).approval).toMatchObject({ id: first, status: 'pending', subject: 'asker' });
    expect((await json(['approvals', 'approve', first, '--note', 'ok'])).approval).toMatchObject({ id: first, status: 'approved' });
    expect((await json(['approvals', 'deny', second])).approval).toMatchObject({ id: second, status: 'denied' });
    // The README's last approvals line: the asks in the audit log (one JSON row per line).
    const asked = await cli(['audit', 'tail', '--decision', 'asked', '--json'], { token });
    expect(asked.code, asked.stderr).toBe(0);
    const rows = asked.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { decision: string; subject: string });
    expect(rows.map((r) => `${r.decision}:${r.subject}`)).toEqual(['asked:asker', 'asked:asker']);

    // The README's approvals lines as written, with a real pending approval in place of its example id.
    const asker = new Client({ name: 'cli-readme', version: '1.0.0' });
    await asker.connect(
      new StreamableHTTPClientTransport(new URL(gw.mcpUrl), {
        requestInit: { headers: { Authorization: `Bearer ${await gw.token({ team: 'jsonteam', scopes: ['execute'], subject: 'asker' })}` } },
      }),
    );
    const third = (await asker.callTool({ name: 'execute', arguments: { command: 'echo', args: ['ask-me', 'three'] } })).structuredContent as {
      approval: { id: string };
    };
    await asker.close();
    const id = third.approval.id;
    const bin = mkdtempSync(join(dir, 'bin-'));
    writeFileSync(join(bin, 'gatehouse'), `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'bin/gatehouse.mjs')}" "$@"\n`, { mode: 0o755 });
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, GATEHOUSE_URL: gw.url, GATEHOUSE_ADMIN_TOKEN: token };
    const lines = readmeBlock('approvals');
    expect(lines).toHaveLength(3);
    const outs: string[] = [];
    for (const line of lines) {
      const real = line.replace(/ap_Q3…/g, id);
      try {
        outs.push((await promisify(execFile)('/bin/sh', ['-ec', real], { cwd: dir, env })).stdout);
      } catch (e) {
        const x = e as { stdout?: string; stderr?: string; message: string };
        throw new Error(`README line failed: ${real}\n${x.message}\n${x.stdout ?? ''}${x.stderr ?? ''}`);
      }
    }
    expect(outs[0]).toMatch(new RegExp(`^${id}\\s+pending\\s+asker`, 'm'));
    expect(outs[1]).toContain(`approved ${id}: asker may now retry this call once`);
    expect((await json(['approvals', 'show', id])).approval).toMatchObject({ status: 'approved', note: 'release' });
    expect(
      outs[2]
        .trim()
        .split('\n')
        .filter((l) => /\basked\s+execute\s+asker\s+echo ask-me/.test(l)),
    ).toHaveLength(3);
  }, 120_000);
});
