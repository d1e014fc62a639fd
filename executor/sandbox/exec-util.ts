/** Small process helpers shared by the drivers. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { endFromWrapperStatus, type ProcessEnd } from './types.ts';

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  error?: string;
}

/** Runs a short helper command (runsc kill/delete/list, version probes) and collects its output. */
export function runQuiet(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    let stdout = '';
    let stderr = '';
    let p: ChildProcess;
    try {
      p = spawn(cmd, args, { env: opts.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' }, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      resolve({ code: null, stdout, stderr, error: (e as Error).message });
      return;
    }
    const t = setTimeout(() => p.kill('SIGKILL'), opts.timeoutMs ?? 15_000);
    // Cap what we keep (a version probe or runsc error never needs more than this), but keep reading to the end:
    // a program whose stdout closes early can crash writing to it (the Erlang VM then leaves erl_crash.dump).
    p.stdout!.on('data', (d: Buffer) => {
      if (stdout.length < 65536) stdout += d;
    });
    p.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 65536) stderr += d;
    });
    p.once('error', (e) => {
      clearTimeout(t);
      resolve({ code: null, stdout, stderr, error: e.message });
    });
    p.once('close', (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * Watches a spawned wrapper (runsc exec, bwrap) and turns its end into a ProcessEnd. Resolves on
 * 'exit', not 'close': a grandchild may still hold the pipes and we never wait on those.
 */
export function watchWrapper(child: ChildProcess, direct = false): Promise<ProcessEnd> {
  return new Promise((resolve) => {
    let settled = false;
    child.once('error', (e) => {
      if (settled) return;
      settled = true;
      resolve({ kind: 'spawn_failed', message: e.message });
    });
    child.once('exit', (code, signal) => {
      if (settled) return;
      settled = true;
      if (direct) resolve(signal ? { kind: 'signaled', signal } : { kind: 'exited', code: code ?? -1 });
      else resolve(endFromWrapperStatus(code, signal));
    });
  });
}

export const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Sends `sig` to a process group, ignoring "no such process". */
export function killGroup(pid: number | undefined, sig: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, sig);
  } catch {
    /* gone */
  }
}

/**
 * Every program that starts a job (a start shell, `runsc run`) begins in bash, which closes every
 * descriptor above the ones the agent handed it. Node marks only low inherited descriptors
 * close-on-exec and cannot set the flag itself (no fcntl), so an agent started with more open — a
 * `flock` wrapper's lock file, a CI runner's or a service manager's pipes and sockets, a shell's
 * `200>>file` — would pass them into every sandbox. bash, not dash: dash cannot name a descriptor
 * above 9. Debian's bash is essential (always installed).
 */
const CLOSING_SHELL = '/bin/bash';

/** O_CLOEXEC as /proc/PID/fdinfo's `flags:` shows it (octal, asm-generic/fcntl.h). */
const O_CLOEXEC = 0o2000000;
let inherits: boolean | null = null;

/**
 * Whether this process holds a descriptor above 2 without close-on-exec: one it inherited (Node
 * opens its own close-on-exec), which every program it starts would hold too. Read once, from
 * /proc/self/fdinfo; anything that cannot be read counts as one. Where this is false, a program
 * that only needs its descriptors closed (`runsc run`) starts without the closing shell.
 */
export function inheritsOpenDescriptors(): boolean {
  if (inherits !== null) return inherits;
  try {
    inherits = readdirSync('/proc/self/fd').some((name) => {
      const fd = Number(name);
      if (!(fd > 2)) return false;
      let info: string;
      try {
        info = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
      } catch {
        return false; // closed since the listing (the listing's own descriptor)
      }
      const flags = /^flags:\s+([0-7]+)$/m.exec(info);
      return !flags || (Number.parseInt(flags[1], 8) & O_CLOEXEC) === 0;
    });
  } catch {
    inherits = true;
  }
  return inherits;
}

/**
 * `[file, args]` for spawn: bash closes every open descriptor above `keep` (what /proc/$$/fd
 * lists: exactly what is open, however high), or exits 125 when it cannot list them, then runs
 * `script` with `args` as $0, $1, …. `--norc`: bash reads ~/.bashrc when its stdin is a socket
 * (it takes that for sshd), and the agent's pipes are sockets.
 */
export function closingShell(keep: number, script: string, args: string[]): [string, string[]] {
  const close =
    `[ -d /proc/$$/fd ] || { echo 'gatehouse: cannot list open descriptors (/proc/'$$'/fd): refusing to start a job that may inherit them' >&2; exit 125; }\n` +
    `for gh_fd in /proc/$$/fd/*; do gh_fd=\${gh_fd##*/}; [ "$gh_fd" -gt ${keep} ] 2>/dev/null && exec {gh_fd}>&-; done\n`;
  return [CLOSING_SHELL, ['--norc', '--noprofile', '-c', close + script, ...args]];
}
