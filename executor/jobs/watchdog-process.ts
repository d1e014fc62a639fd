/**
 * The watchdog process itself (started by watchdog.ts, one per agent, in its own process group).
 * It reads lines on stdin: `{"arm":id,"due":monotonicMs,"kill":[argv],"env":{…}}` and `{"disarm":id}`.
 * At a deadline, or for every armed job when stdin ends (the agent died), it runs that job's kill
 * command and reports on stdout how it went: `{"fired":id,"at":…,"code"|"signal"|"error":…}`.
 *
 * It reads in bursts: after a read it leaves stdin alone for READ_PAUSE_MS, so a busy agent's arms
 * and disarms (two lines per job) cost it one wake-up per pause instead of one per line. A line
 * waits in the pipe meanwhile, which delays nothing: a deadline is the absolute time it is due on
 * the system's monotonic clock (the agent's and ours are the same), not a delay from when it is
 * read. An agent that dies is noticed up to READ_PAUSE_MS later.
 *
 * It imports nothing but Node's own modules: it must keep working whatever state the agent is in.
 */
import { spawn } from 'node:child_process';

interface Armed {
  kill: string[];
  env: Record<string, string> | undefined;
  timer: NodeJS.Timeout;
}

/** How one run of a kill command ended. */
type KillEnd = { error: string } | { code: number | null; signal: NodeJS.Signals | null };

const armed = new Map<number, Armed>();
/**
 * How long stdin is left unread after each read (the wake-ups it saves are CPU per job); the agent
 * never sets GATEHOUSE_WATCHDOG_READ_PAUSE_MS, a test does, to see a line wait in the pipe.
 */
const READ_PAUSE_MS = Number(process.env.GATEHOUSE_WATCHDOG_READ_PAUSE_MS) || 200;
/** Now, on the monotonic clock the agent's deadlines are given in (watchdog.ts `monotonicMs`). */
const monotonicMs = () => Number(process.hrtime.bigint() / 1_000_000n);
process.stdout.on('error', () => {});
const report = (m: object) => {
  try {
    process.stdout.write(JSON.stringify(m) + '\n');
  } catch {}
};
/** A kill command that failed is run again after these pauses (a loaded host can make runsc miss its sandbox's control socket). */
const RETRY_MS = [300, 1000];
let pending = 0;

function fire(id: number): void {
  const a = armed.get(id);
  if (!a) return;
  armed.delete(id);
  clearTimeout(a.timer);
  const at = new Date().toISOString();
  const t = Date.now();
  pending++;
  // What every attempt said: the last one alone hides why the first failed.
  const said: string[] = [];
  const attempt = (n: number) => {
    let err = '';
    let over = false;
    const done = (m: KillEnd) => {
      if (over) return; // a failed spawn may emit both 'error' and 'close'
      over = true;
      if (err.trim()) said.push(err.trim().slice(0, 300));
      if (n < RETRY_MS.length && ('error' in m || m.code !== 0)) return void setTimeout(() => attempt(n + 1), RETRY_MS[n]);
      report({ fired: id, at, attempts: n + 1, ms: Date.now() - t, stderr: said.join(' | ').slice(0, 900), ...m });
      pending--;
    };
    try {
      const c = spawn(a.kill[0], a.kill.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: a.env, detached: true });
      c.stderr.on('data', (d) => {
        if (err.length < 400) err += d;
      });
      c.on('error', (e) => done({ error: e.message }));
      c.on('close', (code, signal) => done({ code, signal }));
      c.unref();
    } catch (e) {
      done({ error: String(e) });
    }
  };
  attempt(0);
}

let buf = '';
let over = false;
function end(): void {
  if (over) return;
  over = true;
  for (const id of [...armed.keys()]) fire(id);
  // Exit once every kill (retries included) is over, or after 5 s whatever happened.
  const quit = Date.now() + 5000;
  const check = () => (pending === 0 || Date.now() > quit ? process.exit(0) : setTimeout(check, 50));
  setTimeout(check, 50);
}

process.stdin.setEncoding('utf8');
process.stdin.on('data', (d: string) => {
  process.stdin.pause();
  setTimeout(() => process.stdin.resume(), READ_PAUSE_MS);
  buf += d;
  for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    let m: { arm?: unknown; disarm?: unknown; due?: unknown; kill?: unknown; env?: Record<string, string> };
    try {
      m = JSON.parse(line);
    } catch {
      continue;
    }
    if (typeof m.arm === 'number' && Array.isArray(m.kill) && m.kill.length) {
      const id = m.arm;
      const prev = armed.get(id);
      if (prev) clearTimeout(prev.timer);
      armed.set(id, { kill: m.kill, env: m.env, timer: setTimeout(() => fire(id), Math.max(0, (Number(m.due) || 0) - monotonicMs())) });
    } else if (typeof m.disarm === 'number') {
      const a = armed.get(m.disarm);
      if (a) {
        clearTimeout(a.timer);
        armed.delete(m.disarm);
      }
    }
  }
});
process.stdin.on('end', end);
process.stdin.on('error', end);
