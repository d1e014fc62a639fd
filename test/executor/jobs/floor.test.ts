/**
 * The agent's local floor, whatever the edge sent: cwd jail (symlinks resolved), executable
 * resolution against the allowlist, capacity, the agent's own timeout ceiling, runtimes.
 * Driven through the runner with the `none` driver (the checks happen before any sandbox).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jobSpec, makeRig, type Rig } from '../helpers.ts';
import type { JobSpec } from '../../../src/contracts/agent-protocol.ts';
import { DISCARD_LIVE } from '../../../executor/jobs/relay.ts';
import { visible } from '../../../src/contracts/visible-text.ts';

let rig: Rig;
let outside: string;
beforeAll(async () => {
  rig = await makeRig('none', { capacity: 2, maxTimeoutMs: 600, withoutRuntimes: ['kotlin'] });
  outside = mkdtempSync(join(tmpdir(), 'gh-outside-'));
  mkdirSync(join(rig.root, 'sub'));
  symlinkSync(outside, join(rig.root, 'escape'));
  symlinkSync('sub', join(rig.root, 'inner-link'));
});
afterAll(async () => {
  await rig.close();
  rmSync(outside, { recursive: true, force: true });
});

let n = 0;
function start(p: Partial<JobSpec>) {
  return rig.runner.start(jobSpec({ jobId: `floor-${++n}`, ...p }), DISCARD_LIVE);
}
function refusal(p: Partial<JobSpec>) {
  const r = start(p);
  if (r.accepted) throw new Error('expected a refusal');
  return r.error;
}

describe('cwd jail', () => {
  it('refuses a cwd that resolves outside the workspace through a symlink', () => {
    expect(refusal({ cwd: 'escape' })).toMatchObject({
      type: 'job.error',
      code: 'policy_denied',
      message: 'Relative CWD "escape" resolves outside the workspace',
    });
  });

  it('refuses absolute paths, .. and NUL', () => {
    for (const cwd of ['/etc', '../x', 'sub/../../x', 'a\0b']) {
      expect(refusal({ cwd })).toMatchObject({
        code: 'policy_denied',
        message: `Relative CWD "${visible(cwd)}" contains path traversal or absolute path components`,
      });
    }
  });

  it('refuses a cwd that does not exist', () => {
    expect(refusal({ cwd: 'nope' }).code).toBe('invalid_argument');
  });

  it('allows a symlink that stays inside and runs there', async () => {
    const r = start({ command: 'pwd', cwd: 'inner-link' });
    expect(r.accepted).toBe(true);
    if (r.accepted) expect((await r.done).exit.stdout).toBe(`${join(rig.root, 'sub')}\n`);
  });
});

describe('executable allowlist', () => {
  it('refuses an executable that is not on the list, with the reference message', () => {
    expect(refusal({ command: 'cat', allowedExecutables: ['echo', 'ls'] })).toMatchObject({
      code: 'policy_denied',
      message: 'Executable "cat" is not in the allowed executables list',
    });
  });

  it('matches by resolved path: an absolute path to an allowed name is allowed, and the other way round', async () => {
    const a = start({ command: '/usr/bin/echo', args: ['x'], allowedExecutables: ['echo'] });
    expect(a.accepted).toBe(true);
    const b = start({ command: 'echo', args: ['y'], allowedExecutables: ['/usr/bin/echo'] });
    expect(b.accepted).toBe(true);
    if (a.accepted && b.accepted) {
      expect((await a.done).exit.stdout).toBe('x\n');
      expect((await b.done).exit.stdout).toBe('y\n');
    }
  });

  it('resolves in the sandbox PATH, not the agent PATH', async () => {
    // A tool only the agent's PATH knows (pyenv shims, ~/.cargo/bin…) does not exist for the job.
    const dir = mkdtempSync(join(tmpdir(), 'gh-agent-path-'));
    writeFileSync(join(dir, 'gh-agent-only-tool'), '#!/bin/sh\necho ran\n', { mode: 0o755 });
    const saved = process.env.PATH;
    process.env.PATH = `${dir}:${saved}`;
    try {
      const r = start({ command: 'gh-agent-only-tool' });
      expect(r.accepted).toBe(true);
      if (r.accepted) expect((await r.done).exit).toMatchObject({ state: 'failed_to_start', exitCode: null, error: { code: 'spawn_failed' } });
    } finally {
      process.env.PATH = saved;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('limits and capacity', () => {
  it('clamps the timeout to the agent ceiling whatever the edge sends', async () => {
    const started = Date.now();
    const r = start({ command: 'sleep', args: ['10'], timeoutMs: 60_000 });
    expect(r.accepted).toBe(true);
    if (r.accepted) expect((await r.done).exit).toMatchObject({ state: 'timed_out', timedOut: true, exitCode: null });
    // Clamped to the 600 ms ceiling, not the 60 s asked for (and killed long before `sleep 10` ends), even on a loaded machine.
    expect(Date.now() - started).toBeLessThan(9000);
  });

  it('refuses a job beyond capacity with job.error capacity', async () => {
    const a = start({ command: 'sleep', args: ['0.3'] });
    const b = start({ command: 'sleep', args: ['0.3'] });
    expect(refusal({ command: 'true' }).code).toBe('capacity');
    if (a.accepted) await a.done;
    if (b.accepted) await b.done;
    const c = start({ command: 'true' });
    expect(c.accepted).toBe(true);
    if (c.accepted) await c.done;
  });
});

describe('runtimes', () => {
  it('refuses a code job whose toolchain is missing, naming the Debian package', () => {
    // The rig's runtime table leaves kotlin out, as on an agent without the toolchain.
    expect(refusal({ mode: 'code', runtime: 'kotlin', command: '', code: 'println(1)' })).toMatchObject({
      code: 'runtime_unavailable',
      message: 'runtime "kotlin" needs kotlinc or kotlin on the agent; install Debian package kotlin',
    });
  });

  it('refuses code mode without code', () => {
    expect(refusal({ mode: 'code', runtime: 'python', command: '' }).code).toBe('invalid_argument');
  });
});
