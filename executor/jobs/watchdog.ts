/**
 * The job's watchdog: a separate host process (sh + coreutils `timeout`) that kills the job's
 * sandbox at its hard deadline unless the agent says in time that the job is over. It does not
 * depend on the agent's event loop: a blocked agent (a read that never returns, a busy loop)
 * cannot keep a job alive past its deadline, and an agent that dies closes the watchdog's stdin,
 * which kills the sandbox at once. It runs in its own process group, so a signal to the
 * agent's group does not take it down with the agent.
 *
 * The agent's own timer still does the normal, graceful timeout (TERM, grace, KILL); the
 * watchdog's deadline is later (timeout + grace + a margin) and only fires when that failed.
 */
import { spawn, type ChildProcess } from 'node:child_process';

/** The watchdog exits 0 when the agent wrote a line (job over), else it runs the kill command. */
const SCRIPT = [
  'secs=$1; shift',
  // read returns 0 on a line, non-zero on EOF (the agent is gone); timeout exits 124 at the deadline.
  '/usr/bin/timeout "$secs" /bin/sh -c "read -r line" || "$@"',
  'exit 0',
].join('\n');

export interface Watchdog {
  /** The job is over: the watchdog exits without killing anything. */
  disarm(): void;
}

export const NO_WATCHDOG: Watchdog = { disarm() {} };

/** Starts a watchdog that runs `killArgv` after `deadlineMs` (or at once if the agent dies). */
export function startWatchdog(deadlineMs: number, killArgv: string[], env: Record<string, string>): Watchdog {
  let child: ChildProcess;
  try {
    child = spawn('/bin/sh', ['-c', SCRIPT, 'gatehouse-watchdog', (Math.ceil(deadlineMs / 100) / 10).toFixed(1), ...killArgv], {
      detached: true, stdio: ['pipe', 'ignore', 'ignore'], env,
    });
  } catch {
    return NO_WATCHDOG;
  }
  child.on('error', () => {});
  child.stdin!.on('error', () => {});
  child.unref();
  let done = false;
  return {
    disarm() {
      if (done) return;
      done = true;
      child.stdin!.end('done\n');
    },
  };
}
