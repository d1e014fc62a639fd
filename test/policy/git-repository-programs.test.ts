/**
 * Differential: the programs a workspace can name for git (filters, drivers, aliases, hooks,
 * helpers) run under the open preset and do not run under strict. Each case writes a real
 * payload into a scratch repository, the policy engine decides `git …`, and the real agent
 * runner runs the decided job with the real git inside the real sandbox (bwrap; `none` only
 * outside CI when bwrap is missing). The open run proves each payload is real.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobSpec } from '../../src/contracts/agent-protocol.ts';
import { PolicyDocument } from '../../src/contracts/policy.ts';
import { gitRepositoryOptions } from '../../src/contracts/git-hardening.ts';
import { PRESETS } from '../../src/policy/presets.ts';
import { hasCommand, testSandbox } from '../e2e/harness.ts';
import { makeRig, requireTool, suiteRig, type Rig } from '../executor/helpers.ts';
import type { SandboxKind } from '../../src/contracts/agent-protocol.ts';
import { SANDBOX_UID } from '../../executor/sandbox/types.ts';
import { check, run } from './helpers.ts';

const skip = !hasCommand('git') && process.env.CI !== 'true';
if (skip) console.warn('skipping: git is not installed (allowed outside CI only)');

interface Case {
  name: string;
  /** sh run on the host in the case's repository; `$W` is that directory as the job sees it, `$M` the marker. */
  setup: string;
  args: string[];
}

/**
 * The strict preset without its "ask" rules: `git rebase` would wait for a person's approval
 * there, and what these tests attack is how the approved git runs.
 */
const STRICT = PolicyDocument.parse({ ...PRESETS.strict.policy, rules: [] });

const BASE = 'git init -q . && git config user.email a@x.invalid && git config user.name a && echo one > f && git add f && git commit -qm 1';
const SCRIPT = (body: string) => `printf '#!/bin/sh\\n%s\\n' "${body}"`;

const CASES: Case[] = [
  {
    name: 'filter clean on add',
    setup: `echo '* filter=x' > .gitattributes && git config filter.x.clean "touch $M; cat" && echo two >> f`,
    args: ['add', 'f'],
  },
  { name: 'filter process on add', setup: `echo '* filter=x' > .gitattributes && git config filter.x.process "touch $M" && echo two >> f`, args: ['add', 'f'] },
  {
    name: 'filter smudge on checkout',
    setup: `echo '* filter=x' > .gitattributes && git config filter.x.smudge "touch $M; cat" && rm f`,
    args: ['checkout', '--', 'f'],
  },
  {
    name: 'filter clean on status (stat-dirty file)',
    setup: `echo '* filter=x' > .gitattributes && git config filter.x.clean "touch $M; cat" && touch -m -d @1 f`,
    args: ['status'],
  },
  {
    name: 'filter named in an included config file',
    setup: `echo '* filter=x' > .gitattributes && printf '[filter "x"]\\n\\tclean = touch %s; cat\\n' "$M" > inc && git config include.path ../inc && echo two >> f`,
    args: ['add', 'f'],
  },
  { name: 'core.fsmonitor on status', setup: `git config core.fsmonitor "touch $M; :"`, args: ['status'] },
  {
    name: 'pre-commit hook',
    setup: `${SCRIPT('touch $M')} > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit`,
    args: ['commit', '-q', '--allow-empty', '-m', 'x'],
  },
  {
    name: 'core.hooksPath in the workspace',
    setup: `mkdir h && ${SCRIPT('touch $M')} > h/pre-commit && chmod +x h/pre-commit && git config core.hooksPath h`,
    args: ['commit', '-q', '--allow-empty', '-m', 'x'],
  },
  { name: 'diff.external on diff', setup: `git config diff.external "touch $M; :" && echo two >> f`, args: ['diff'] },
  {
    name: 'diff.<driver>.command on diff',
    setup: `echo '* diff=y' > .gitattributes && git config diff.y.command "touch $M; :" && echo two >> f`,
    args: ['diff'],
  },
  {
    name: 'diff.<driver>.textconv on log -p',
    setup: `echo '* diff=y' > .gitattributes && git config diff.y.textconv "touch $M; cat" && echo two >> f && git commit -qam 2`,
    args: ['log', '-p'],
  },
  {
    name: 'merge.<driver>.driver on merge',
    setup: `echo '* merge=z' > .gitattributes && git config merge.z.driver "touch $M; false" && git checkout -qb b && echo b > f && git commit -qam b && git checkout -q - && echo a > f && git commit -qam a`,
    args: ['merge', 'b'],
  },
  { name: 'alias with !', setup: `git config alias.st "!touch $M"`, args: ['st'] },
  { name: 'core.editor on commit', setup: `git config core.editor "touch $M; :"`, args: ['commit', '--allow-empty'] },
  {
    name: 'sequence.editor on rebase -i',
    setup: `git commit -q --allow-empty -m 2 && git config sequence.editor "touch $M; :"`,
    args: ['rebase', '-i', 'HEAD~1'],
  },
  {
    name: 'gpg.program with commit.gpgSign',
    setup: `${SCRIPT('touch $M; exit 1')} > g.sh && chmod +x g.sh && git config commit.gpgSign true && git config gpg.program "$W/g.sh"`,
    args: ['commit', '-q', '--allow-empty', '-m', 's'],
  },
  { name: 'core.sshCommand on fetch', setup: `git config core.sshCommand "touch $M; :" && git remote add s host.invalid:repo`, args: ['fetch', 's'] },
  {
    name: 'remote.<name>.uploadpack on a local fetch',
    setup: `git init -q --bare src.git && git remote add o "$W/src.git" && git config remote.o.uploadpack "touch $M; git-upload-pack"`,
    args: ['fetch', 'o'],
  },
  {
    name: 'core.gitProxy on a git:// fetch',
    setup: `${SCRIPT('touch $M')} > p.sh && chmod +x p.sh && git config core.gitProxy "$W/p.sh"`,
    args: ['fetch', 'git://h.invalid/x'],
  },
  {
    name: 'a filter in a conditional include (includeIf onbranch)',
    setup: `git checkout -qb topic && echo '* filter=x' > .gitattributes && printf '[filter "x"]\\n\\tclean = touch %s; cat\\n' "$M" > inc && git config includeIf.onbranch:topic.path ../inc && echo two >> f`,
    args: ['add', 'f'],
  },
  {
    name: 'a bare repository found by walking up (its alias)',
    setup: `rm -rf .git f && git init -q --bare . && git config alias.st "!touch $M"`,
    args: ['st'],
  },
];

/** Under gVisor the job is the sandbox user: give it the repository (git refuses another user's). */
function ownForSandbox(rig: Rig, host: string): void {
  if (rig.kind === 'gvisor') execFileSync('chown', ['-R', `${SANDBOX_UID}:${SANDBOX_UID}`, host]);
}

let n = 0;
/** Decides `git args` under the policy and runs the decided job the way the edge hands it to the agent. */
async function attempt(rig: Rig, policy: PolicyDocument, c: Case): Promise<{ allowed: boolean; marker: boolean; exitCode: number | null; stderr: string }> {
  const dir = `case${++n}`;
  const host = join(rig.root, dir);
  const inside = `${rig.kind === 'none' ? rig.root : '/workspace'}/${dir}`;
  mkdirSync(host);
  const base = c.name.startsWith('a bare repository') ? 'true' : BASE;
  execFileSync('sh', ['-ec', `${base} && ${c.setup}`], {
    cwd: host,
    stdio: 'pipe',
    env: { PATH: process.env.PATH, HOME: host, GIT_CONFIG_NOSYSTEM: '1', W: inside, M: `${inside}/MARKER` },
  });
  ownForSandbox(rig, host);
  const d = await check(policy, { command: 'git', args: c.args, cwd: dir });
  if (!d.allowed || !d.effective) return { allowed: false, marker: false, exitCode: null, stderr: d.reason };
  const e = d.effective;
  const spec: Partial<JobSpec> = {
    mode: 'argv',
    command: d.runAs?.command ?? 'git',
    args: d.runAs?.args ?? c.args,
    cwd: e.cwd,
    env: e.env,
    timeoutMs: 20_000,
    ...(e.allowedExecutables ? { allowedExecutables: e.allowedExecutables } : {}),
    ...(e.hardenGit ? { hardenGit: true as const } : {}),
  };
  const r = await rig.run(spec);
  return { allowed: true, marker: existsSync(join(host, 'MARKER')), exitCode: r.exit.exitCode, stderr: r.exit.stderr };
}

/**
 * bwrap (or none outside CI), and gVisor, whose launcher sets the job's env with shell builtins.
 * gVisor runs jobs as the sandbox user, and git refuses a repository another user owns, so there
 * the scratch repositories are handed to that user.
 */
const SANDBOXES: SandboxKind[] = [testSandbox(), ...(requireTool('gvisor') ? ['gvisor' as const] : [])];

describe.skipIf(skip).each(SANDBOXES)('%s: strict switches off the programs a repository names; open runs them', (kind) => {
  const rig = suiteRig(kind);

  it.each(CASES)(
    '$name',
    async (c) => {
      const open = await attempt(rig, PRESETS.open.policy, c);
      expect(open.allowed).toBe(true);
      expect(open.marker, `open: the payload must run (exit ${open.exitCode}: ${open.stderr})`).toBe(true);
      const strict = await attempt(rig, STRICT, c);
      expect(strict.allowed, strict.stderr).toBe(true);
      expect(strict.marker, `strict: the payload ran (exit ${strict.exitCode}: ${strict.stderr})`).toBe(false);
    },
    60_000,
  );

  it('refuses to start git when the repository sets a key git keeps the first value of (an override would be ignored)', async () => {
    const r = await attempt(rig, PRESETS.strict.policy, CASES.find((c) => c.name.startsWith('remote.<name>.uploadpack'))!);
    expect(r.marker).toBe(false);
    expect(r.exitCode).toBe(126);
    expect(r.stderr).toContain('sets remote.o.uploadpack, which can make git run a program that cannot be switched off');
    // A conditional include: its condition can turn true within one command, after the listing.
    const inc = await attempt(rig, PRESETS.strict.policy, CASES.find((c) => c.name.startsWith('a filter in a conditional include'))!);
    expect(inc.exitCode).toBe(126);
    expect(inc.stderr).toContain('sets includeif.onbranch:topic.path');
  }, 60_000);

  it('fails closed when git cannot list the configuration (a broken .git/config)', async () => {
    const r = await attempt(rig, PRESETS.strict.policy, {
      name: 'broken config',
      setup: `printf '[filter "x"\\n\\tclean = touch %s\\n[[[\\n' "$M" >> .git/config`,
      args: ['status'],
    });
    expect(r.marker).toBe(false);
    expect(r.exitCode).toBe(126);
    expect(r.stderr).toContain('could not list the repository configuration');
  }, 60_000);

  it('runs git outside any repository (nothing to list)', async () => {
    const d = await check(PRESETS.strict.policy, { command: 'git', args: ['version'] });
    const r = await rig.run({
      mode: 'argv',
      command: 'git',
      args: ['version'],
      cwd: '',
      env: d.effective!.env,
      allowedExecutables: d.effective!.allowedExecutables,
      hardenGit: true,
    });
    expect(r.exit.stdout, r.exit.stderr).toMatch(/^git version /);
  }, 60_000);

  it('strict still does the git work: add, commit, status, diff, log in a repository without programs', async () => {
    const dir = 'plain';
    const host = join(rig.root, dir);
    mkdirSync(host);
    execFileSync('sh', ['-ec', `${BASE} && echo two >> f`], {
      cwd: host,
      stdio: 'pipe',
      env: { PATH: process.env.PATH, HOME: host, GIT_CONFIG_NOSYSTEM: '1' },
    });
    ownForSandbox(rig, host);
    const go = async (...args: string[]) => {
      const d = await check(PRESETS.strict.policy, { command: 'git', args, cwd: dir });
      expect(d.allowed, d.reason).toBe(true);
      const e = d.effective!;
      return rig.run({ mode: 'argv', command: 'git', args, cwd: e.cwd, env: e.env, allowedExecutables: e.allowedExecutables, hardenGit: e.hardenGit });
    };
    const diff = await go('diff');
    expect(diff.exit.stdout, diff.exit.stderr).toContain('+two');
    expect((await go('add', 'f')).exit.exitCode).toBe(0);
    expect((await go('commit', '-q', '-m', 'two')).exit.exitCode).toBe(0);
    expect((await go('status', '--porcelain')).exit.stdout).toBe('');
    expect((await go('log', '--oneline')).exit.stdout).toContain('two');
  }, 60_000);
});

describe("the listing run reads the repository the job's git reads", () => {
  it('keeps -C, --git-dir and --work-tree (both spellings) and --bare, in order; drops the rest', () => {
    expect(gitRepositoryOptions(['-C', 'a', '--no-pager', '-C', 'b', '--git-dir=g', '--work-tree', 'w', '--bare', 'status', '-C', 'x'])).toEqual([
      '-C',
      'a',
      '-C',
      'b',
      '--git-dir=g',
      '--work-tree',
      'w',
      '--bare',
    ]);
    expect(gitRepositoryOptions(['--namespace', 'n', '--git-dir', 'g', 'log'])).toEqual(['--git-dir', 'g']);
    expect(gitRepositoryOptions(['status'])).toEqual([]);
  });
});

describe('strict: git decisions', () => {
  it('marks argv git (also a simple command string) for the agent to harden, and says so', async () => {
    const d = await run(PRESETS.strict.policy, 'git', 'status');
    expect(d.allowed).toBe(true);
    expect(d.effective?.hardenGit).toBe(true);
    expect(d.notes.join(' ')).toContain('git.repositoryPrograms');
    expect((await check(PRESETS.strict.policy, { mode: 'shell', command: 'git log --oneline' })).effective?.hardenGit).toBe(true);
    expect((await run(PRESETS.open.policy, 'git', 'status')).effective?.hardenGit).toBeUndefined();
    expect((await run(PRESETS.strict.policy, 'ls')).effective?.hardenGit).toBeUndefined();
  });
  it('refuses submodules (their configuration is not switched off), only under strict', async () => {
    for (const args of [
      ['submodule', 'update', '--init'],
      ['clone', '--recurse-submodules', 'a', 'b'],
      ['pull', '--recurse-sub'],
      ['checkout', '--recurse-submodules=yes', 'x'],
    ]) {
      const d = await run(PRESETS.strict.policy, 'git', ...args);
      expect(d.allowed, args.join(' ')).toBe(false);
      expect(d.reason).toContain('submodules');
      expect((await run(PRESETS.open.policy, 'git', ...args)).allowed, args.join(' ')).toBe(true);
    }
  });
  it('runs one job at a time (the agent lists the configuration just before git reads it)', () => {
    expect(PRESETS.strict.policy.limits.maxConcurrentJobs).toBe(1);
  });
});

/**
 * Credential helpers and askpass run only when a server asks for credentials, and the sandboxes
 * have no network. So these two run in the `none` driver (the same launcher, no isolation)
 * against a loopback HTTP server that answers 401 to everything.
 */
describe.skipIf(skip)('strict switches off credential helpers and askpass (loopback server, driver none)', () => {
  let rig: Rig;
  let server: Server;
  let url = '';
  beforeAll(async () => {
    rig = await makeRig('none');
    server = createServer((_req, res) => {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="gatehouse-test"' });
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/repo.git`;
  }, 60_000);
  afterAll(async () => {
    await rig?.close();
    await new Promise((r) => server?.close(r));
  });

  const cases = (): Case[] => [
    { name: 'credential.helper', setup: `git config credential.helper "!touch $M; :"`, args: ['ls-remote', url] },
    { name: 'credential.<url>.helper', setup: `git config "credential.${url}.helper" "!touch $M; :"`, args: ['ls-remote', url] },
    { name: 'core.askPass', setup: `${SCRIPT('touch $M')} > a.sh && chmod +x a.sh && git config core.askPass "$W/a.sh"`, args: ['ls-remote', url] },
  ];
  it.each(['credential.helper', 'credential.<url>.helper', 'core.askPass'])(
    '%s',
    async (name) => {
      const c = cases().find((x) => x.name === name)!;
      const open = await attempt(rig, PRESETS.open.policy, c);
      expect(open.marker, `${c.name} under open must run (exit ${open.exitCode}: ${open.stderr})`).toBe(true);
      const strict = await attempt(rig, STRICT, c);
      expect(strict.allowed).toBe(true);
      expect(strict.marker, `${c.name} ran under strict (exit ${strict.exitCode}: ${strict.stderr})`).toBe(false);
      expect(strict.exitCode).not.toBe(0);
    },
    60_000,
  );
});
