/**
 * The jobs' watchdog: a separate host process that kills a job's sandbox at its hard deadline
 * unless the agent says in time that the job is over. It does not depend on the agent's event
 * loop: a blocked agent (a read that never returns, a busy loop) cannot keep a job alive past its
 * deadline, and an agent that dies closes the watchdog's stdin, which kills the sandbox of every
 * job still armed at once. It runs in its own process group, so a signal to the agent's group
 * does not take it down with the agent.
 *
 * One watchdog process serves all of an agent's jobs (one line per arm / disarm on its stdin):
 * a process per job cost ~5.6 ms of CPU per job (a fork of the agent and three execs), more than
 * the job `true` itself. If the watchdog process ever exits, the next job starts a new one, which
 * re-arms every job still running with its remaining time.
 *
 * The agent's own timer still does the normal, graceful timeout (TERM, grace, KILL); the
 * watchdog's deadline is later (timeout + grace + a margin) and only fires when that failed.
 *
 * This file is the agent's side (arm, disarm, hear reports); the process runs watchdog-process.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { shippedFile } from '../shipped-files.ts';

export interface Watchdog {
  /** The job is over: its deadline is dropped without killing anything. */
  disarm(): void;
}

/** What the watchdog process says after it ran a job's kill command (`error` when it could not start it). */
export interface WatchdogReport {
  /** When the deadline fired (ISO time, the watchdog's clock). */
  at: string;
  code?: number | null;
  signal?: string | null;
  /** How long the kill took, retries included. */
  ms?: number;
  /** How often the kill command ran (a failed one is retried). */
  attempts?: number;
  stderr?: string;
  error?: string;
}

/** How long a report is awaited after a disarm that came past the deadline (the kill may have raced the job's end). */
const REPORT_WAIT_MS = 60_000;

export const NO_WATCHDOG: Watchdog = { disarm() {} };

interface Armed {
  /** When the kill command runs, on the system's monotonic clock (monotonicMs). */
  at: number;
  kill: string[];
  env: Record<string, string>;
}

/** Jobs armed and not yet disarmed: re-sent to a new watchdog process if the current one exits. */
const armed = new Map<number, Armed>();
/** Who hears of a fired deadline, by arm id; dropped at a disarm before the deadline (it cannot have fired). */
const listeners = new Map<number, (r: WatchdogReport) => void>();
let nextId = 0;
let proc: ChildProcess | null = null;

function write(p: ChildProcess, m: object): boolean {
  try {
    p.stdin!.write(JSON.stringify(m) + '\n');
    return true;
  } catch {
    return false;
  }
}

/**
 * Now in ms on CLOCK_MONOTONIC, which every process of the host reads alike: the watchdog process
 * may read an arm a while after it was written (it reads in bursts), so a deadline is sent as the
 * time it is due, not as a delay.
 */
function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1_000_000n);
}

function arm(p: ChildProcess, id: number, a: Armed): boolean {
  return write(p, { arm: id, due: a.at, kill: a.kill, env: a.env });
}

/** The running watchdog process, started (with every armed job re-armed) if there is none. */
function watchdogProcess(env: Record<string, string>): ChildProcess | null {
  if (proc && proc.exitCode === null && proc.signalCode === null && proc.stdin?.writable) return proc;
  // Outside the try: a package without the program fails the job loudly instead of running it without its backstop.
  const program = shippedFile('watchdog');
  let p: ChildProcess;
  try {
    p = spawn(process.execPath, [program], { detached: true, stdio: ['pipe', 'pipe', 'ignore'], env });
  } catch {
    return null;
  }
  p.on('error', () => {});
  p.stdin!.on('error', () => {});
  let out = '';
  p.stdout!.setEncoding('utf8');
  p.stdout!.on('data', (d: string) => {
    out += d;
    for (let i = out.indexOf('\n'); i >= 0; i = out.indexOf('\n')) {
      const line = out.slice(0, i);
      out = out.slice(i + 1);
      let m: { fired?: unknown } & WatchdogReport;
      try {
        m = JSON.parse(line) as typeof m;
      } catch {
        continue;
      }
      if (typeof m.fired !== 'number') continue;
      const hear = listeners.get(m.fired);
      listeners.delete(m.fired);
      hear?.({ at: m.at, code: m.code, signal: m.signal, ms: m.ms, attempts: m.attempts, stderr: m.stderr, error: m.error });
    }
  });
  p.once('exit', () => {
    if (proc === p) proc = null;
  });
  // Neither the process nor its stdin keeps the agent alive: the agent's exit is what ends it.
  p.unref();
  (p.stdin as unknown as Socket).unref?.();
  (p.stdout as unknown as Socket).unref?.();
  proc = p;
  for (const [id, a] of armed) arm(p, id, a);
  return p;
}

/**
 * Arms a deadline: `killArgv` runs `deadlineMs` from now (or at once if the agent dies) unless
 * disarmed; `onFired` hears how the kill went (after the fact: the agent may have been blocked).
 */
export function startWatchdog(deadlineMs: number, killArgv: string[], env: Record<string, string>, onFired?: (r: WatchdogReport) => void): Watchdog {
  const p = watchdogProcess(env);
  if (!p) return NO_WATCHDOG;
  const id = ++nextId;
  const a: Armed = { at: monotonicMs() + deadlineMs, kill: killArgv, env };
  armed.set(id, a);
  if (onFired) listeners.set(id, onFired);
  arm(p, id, a);
  return {
    disarm() {
      if (!armed.delete(id)) return;
      if (proc) write(proc, { disarm: id });
      // The watchdog's timer starts after `a.at` was taken, so before it nothing has fired.
      if (monotonicMs() < a.at) listeners.delete(id);
      else setTimeout(() => listeners.delete(id), REPORT_WAIT_MS).unref();
    },
  };
}
