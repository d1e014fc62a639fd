/**
 * Differential tests of the argument screens against the REAL programs: each case runs the
 * program in a scratch directory with a payload that creates a marker file, and the screen's
 * verdict must agree with what happened — a payload that ran must be denied. Attack cases also
 * assert that the payload really runs here, so the test fails if it stops proving anything.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hasCommand } from '../e2e/harness.ts';
import { policy, run } from './helpers.ts';

const PROGRAMS = ['tar', 'sort', 'git', 'make', 'sdiff', 'diff'];
const missing = PROGRAMS.filter((p) => !hasCommand(p));
const skip = missing.length > 0 && process.env.CI !== 'true';
if (missing.length && process.env.CI === 'true') throw new Error(`differential tests need ${missing.join(', ')} (CI=true: a missing part is a failure)`);

const P = policy({ executables: { allow: [...PROGRAMS, 'cc'] } });
const scratchRoots: string[] = [];
afterAll(() => {
  for (const d of scratchRoots) rmSync(d, { recursive: true, force: true });
});

interface Case {
  name: string;
  /** Commands run in order; `M` in an argument is replaced by the marker's path, `D` by the scratch dir. */
  steps: string[][];
  setup?: (dir: string, marker: string) => void;
  /** Whether the payload really runs with the real program (checked). */
  executes: boolean;
  /** Standard input of every step (empty when absent). */
  stdin?: string;
}

function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'gh-diff-'));
  scratchRoots.push(d);
  return d;
}

function script(dir: string, marker: string): string {
  const p = join(dir, 'payload.sh');
  writeFileSync(p, `#!/bin/sh\ntouch '${marker}'\ncat\n`);
  chmodSync(p, 0o755);
  return p;
}

const gitRepo = (dir: string) => {
  const g = (...a: string[]) => spawnSync('git', a, { cwd: dir, env: envFor(dir), stdio: 'ignore' });
  g('init', '-q', 'a');
  g('-C', 'a', 'commit', '-q', '--allow-empty', '-m', 'x');
};

function envFor(dir: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: dir,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_AUTHOR_NAME: 'a',
    GIT_AUTHOR_EMAIL: 'a@example.invalid',
    GIT_COMMITTER_NAME: 'a',
    GIT_COMMITTER_EMAIL: 'a@example.invalid',
    LC_ALL: 'C',
  };
}

const CASES: Case[] = [
  // tar: -f takes `--` as its value, so the options go on.
  {
    name: 'tar -f takes -- as its value',
    steps: [['tar', '-c', '-f', '--', '--checkpoint=1', '--checkpoint-action=exec=touch M', 'f']],
    executes: true,
    setup: (d) => writeFileSync(join(d, 'f'), 'x'),
  },
  {
    name: 'tar old-style f takes -- as its value',
    steps: [['tar', 'cf', '--', '--checkpoint=1', '--checkpoint-action=exec=touch M', 'f']],
    executes: true,
    setup: (d) => writeFileSync(join(d, 'f'), 'x'),
  },
  {
    name: 'tar cluster -cf takes -- as its value',
    steps: [['tar', '-cf', '--', '--checkpoint=1', '--checkpoint-act=exec=touch M', 'f']],
    executes: true,
    setup: (d) => writeFileSync(join(d, 'f'), 'x'),
  },
  {
    name: 'tar: a real -- ends the options',
    steps: [['tar', '-c', '-f', 'x.tar', '--', 'f']],
    executes: false,
    setup: (d) => writeFileSync(join(d, 'f'), 'x'),
  },
  // sort: -o takes `--`; the compressor runs once temporary files are needed.
  {
    name: 'sort -o takes -- as its value',
    steps: [['sort', '-o', '--', '--compress-program=D/payload.sh', '-S', '1K', 'big']],
    executes: true,
    setup: (d, m) => {
      script(d, m);
      writeFileSync(join(d, 'big'), Array.from({ length: 20_000 }, (_, i) => `${(i * 7919) % 20_000}\n`).join(''));
    },
  },
  {
    name: 'sort: a real -- ends the options',
    steps: [['sort', '-o', 'out', '--', 'big']],
    executes: false,
    setup: (d) => writeFileSync(join(d, 'big'), 'b\na\n'),
  },
  // git: --branch / -b take `--`.
  {
    name: 'git clone --branch takes -- as its value',
    steps: [['git', 'clone', '--branch', '--', '--upload-pack=touch M', 'a', 'b']],
    executes: true,
    setup: gitRepo,
  },
  {
    name: 'git clone --bra (prefix) takes -- as its value',
    steps: [['git', 'clone', '--bra', '--', '--upload-pack=touch M', 'a', 'b']],
    executes: true,
    setup: gitRepo,
  },
  { name: 'git clone -b takes -- as its value', steps: [['git', 'clone', '-b', '--', '-utouch M', 'a', 'c']], executes: true, setup: gitRepo },
  { name: 'git clone of a local repository', steps: [['git', 'clone', '-q', '--', 'a', 'b']], executes: false, setup: gitRepo },
  // git: config keys that name programs.
  {
    name: 'git config gpg.ssh.defaultKeyCommand then commit -S',
    steps: [
      ['git', '-C', 'a', 'config', 'gpg.format', 'ssh'],
      ['git', '-C', 'a', 'config', 'gpg.ssh.defaultKeyCommand', 'touch M'],
      ['git', '-C', 'a', 'commit', '-S', '--allow-empty', '-m', 'y'],
    ],
    executes: true,
    setup: gitRepo,
  },
  {
    name: 'git config --rename-section turns a harmless b.fsmonitor into core.fsmonitor, run by status',
    steps: [
      ['git', '-C', 'a', 'config', 'b.fsmonitor', 'touch M; :'],
      ['git', '-C', 'a', 'config', '--rename-section', 'b', 'core'],
      ['git', '-C', 'a', 'status'],
    ],
    executes: true,
    setup: gitRepo,
  },
  {
    name: 'git config imap.tunnel then imap-send runs the tunnel',
    steps: [
      ['git', '-C', 'a', 'config', 'imap.folder', 'x'],
      ['git', '-C', 'a', 'config', 'imap.tunnel', 'touch M'],
      ['git', '-C', 'a', 'imap-send'],
    ],
    executes: true,
    setup: gitRepo,
    stdin:
      'From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: a <a@example.invalid>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nSubject: [PATCH] x\n\nbody\n---\n f | 1 +\n',
  },
  {
    name: 'git diff --ext-diff runs diff.external from the repository',
    steps: [['git', '-C', 'a', 'diff', '--ext-diff', 'HEAD~0']],
    executes: true,
    setup: (d, m) => {
      gitRepo(d);
      script(d, m);
      writeFileSync(join(d, 'a', 'f'), 'x');
      spawnSync('git', ['-C', 'a', 'add', 'f'], { cwd: d, env: envFor(d) });
      spawnSync('git', ['-C', 'a', 'config', 'diff.external', join(d, 'payload.sh')], { cwd: d, env: envFor(d) });
    },
  },
  // make: CC named by the caller runs through the built-in %: %.c rule.
  {
    name: 'make CC="touch M #" runs through a built-in rule',
    steps: [['make', '-f', '/dev/null', 'x', 'CC=touch M #']],
    executes: true,
    setup: (d) => writeFileSync(join(d, 'x.c'), 'int main(void){return 0;}\n'),
  },
  {
    name: 'make CC=payload (a program the policy does not allow)',
    steps: [['make', '-f', '/dev/null', 'x', 'CC=D/payload.sh']],
    executes: true,
    setup: (d, m) => {
      script(d, m);
      writeFileSync(join(d, 'x.c'), 'int main(void){return 0;}\n');
    },
  },
  {
    name: 'make -f takes -- as its value, then --eval',
    steps: [['make', '-f', '--', '--eval=$(shell touch M)', 'x']],
    executes: true,
    setup: (d) => writeFileSync(join(d, '--'), 'x:\n\t@true\n'),
  },
  {
    name: 'make with an allowed CC',
    steps: [['make', '-f', '/dev/null', 'x', 'CC=cc']],
    executes: false,
    setup: (d) => writeFileSync(join(d, 'x.c'), 'int main(void){return 0;}\n'),
  },
  // diff family.
  {
    name: 'sdiff --diff-program',
    steps: [['sdiff', '--diff-program=D/payload.sh', 'a', 'b']],
    executes: true,
    setup: (d, m) => {
      script(d, m);
      writeFileSync(join(d, 'a'), 'a\n');
      writeFileSync(join(d, 'b'), 'b\n');
    },
  },
  {
    name: 'sdiff -o takes -- as its value',
    steps: [['sdiff', '-o', '--', '--diff-program=D/payload.sh', 'a', 'b']],
    executes: true,
    setup: (d, m) => {
      script(d, m);
      writeFileSync(join(d, 'a'), 'a\n');
      writeFileSync(join(d, 'b'), 'b\n');
    },
  },
  {
    name: 'plain diff',
    steps: [['diff', 'a', 'b']],
    executes: false,
    setup: (d) => {
      writeFileSync(join(d, 'a'), 'a\n');
      writeFileSync(join(d, 'b'), 'b\n');
    },
  },
];

describe.skipIf(skip)('argument screens agree with the real programs', () => {
  it.each(CASES)('$name', async (c) => {
    const dir = scratch();
    const marker = join(dir, 'MARKER');
    c.setup?.(dir, marker);
    const fill = (a: string) => a.replaceAll('D/', `${dir}/`).replace(/\bM\b/, marker);
    const verdicts: boolean[] = [];
    for (const step of c.steps) {
      const argv = step.map(fill);
      verdicts.push((await run(P, argv[0], ...argv.slice(1))).allowed);
      spawnSync(argv[0], argv.slice(1), { cwd: dir, env: envFor(dir), stdio: ['pipe', 'ignore', 'ignore'], timeout: 30_000, input: c.stdin ?? '' });
    }
    const ran = existsSync(marker);
    expect(ran, `the payload ${ran ? 'ran' : 'did not run'} with the real ${c.steps[0][0]}`).toBe(c.executes);
    if (ran) expect(verdicts.every(Boolean), 'a payload that ran must be denied by the screen at some step').toBe(false);
    else expect(verdicts.every(Boolean), 'a harmless command must be allowed').toBe(true);
  });
});
