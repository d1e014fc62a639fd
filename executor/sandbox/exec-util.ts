/** Small process helpers shared by the drivers. */
import { spawn, type ChildProcess } from 'node:child_process';
import { endFromWrapperStatus, type ProcessEnd } from './types.ts';

export interface RunResult { code: number | null; stdout: string; stderr: string; error?: string }

/** Runs a short helper command (runsc kill/delete/list, version probes) and collects its output. */
export function runQuiet(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    let stdout = '';
    let stderr = '';
    let p: ChildProcess;
    try {
      p = spawn(cmd, args, { env: opts.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      resolve({ code: null, stdout, stderr, error: (e as Error).message });
      return;
    }
    const t = setTimeout(() => p.kill('SIGKILL'), opts.timeoutMs ?? 15_000);
    // Cap what we keep: a version probe or runsc error never needs more than this.
    p.stdout!.on('data', (d: Buffer) => { if (stdout.length < 65536) stdout += d; });
    p.stderr!.on('data', (d: Buffer) => { if (stderr.length < 65536) stderr += d; });
    p.once('error', (e) => { clearTimeout(t); resolve({ code: null, stdout, stderr, error: e.message }); });
    p.once('close', (code) => { clearTimeout(t); resolve({ code, stdout, stderr }); });
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
  try { process.kill(-pid, sig); } catch { /* gone */ }
}
