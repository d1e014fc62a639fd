/**
 * One launched job, watched until its process is gone: stdin fed and closed, output read into its
 * captures, the watchdog armed as the backstop of its deadline (watchdog.ts), disk writes counted
 * (disk-writes.ts), and pipes that a leftover process still holds given up after a grace.
 */
import type { Readable, Writable } from 'node:stream';
import type { StreamName } from '../../src/contracts/agent-protocol.ts';
import type { Logger } from '../log.ts';
import type { LaunchRequest, ProcessEnd, Sandbox } from '../sandbox/types.ts';
import type { StreamCapture } from './capture.ts';
import { watchDiskWrites } from './disk-writes.ts';
import { parseBuildStatus } from './launcher.ts';
import { NO_WATCHDOG, startWatchdog, type Watchdog } from './watchdog.ts';

/** The watchdog fires this long after the agent's own timeout + grace would have (see watchdog.ts). */
const WATCHDOG_MARGIN_MS = 2000;
/** The watchdog's environment: where `timeout`, `kill` and `runsc` are, nothing else. */
const WATCHDOG_ENV = { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' };

export interface SuperviseOptions {
  jobId: string;
  /** Whether a cancel or timeout already came (it found nothing to kill while the sandbox was prepared). */
  stopped(): boolean;
  stdin: string | undefined;
  /** Interactive: stdin stays open, handed here once launched (after `stdin` is written to it). */
  keepStdin?: (w: Writable) => void;
  caps: Record<StreamName, StreamCapture>;
  timeoutMs: number;
  diskWriteBytes: number;
  /** TERM → KILL grace of the agent's own stop. */
  graceMs: number;
  /** After the process ends, how long its pipes may stay open before reading stops. */
  drainMs: number;
  diskPollMs?: number;
  log: Logger;
}

export interface Supervised {
  end: ProcessEnd;
  /** The build step's status from the launcher's status pipe; null when it never reported one. */
  buildStatus: number | null;
  /** performance.now() at the launch. */
  startedAt: number;
  diskExceeded: boolean;
  memoryHit: boolean;
}

/** Starts the launcher, feeds stdin, reads output; returns once the job's process is gone. */
export async function superviseLaunch(sandbox: Sandbox, req: LaunchRequest, o: SuperviseOptions): Promise<Supervised> {
  const { caps, stdin } = o;
  // A job given no stdin: a sandbox whose init starts the steps closes the pipe itself (no end to send it).
  const noStdin = !stdin && !o.keepStdin;
  const { child, ended, status } = sandbox.launch(req.steps && noStdin ? { ...req, steps: { ...req.steps, noStdin } } : req);
  const startedAt = performance.now();
  const kill = sandbox.hostKillArgv();
  const deadline = o.timeoutMs + o.graceMs + WATCHDOG_MARGIN_MS;
  const watchdog: Watchdog = kill
    ? startWatchdog(deadline, kill, WATCHDOG_ENV, (r) =>
        o.log.warn(
          `job ${o.jobId}: the watchdog killed its sandbox at ${r.at}, ${deadline} ms after the start (the agent had not ended it): ` +
            (r.error
              ? `\`${kill[0]}\` did not start: ${r.error}`
              : `\`${kill.join(' ')}\` ${r.signal ? `died of ${r.signal}` : `exited ${r.code}`} in ${r.ms} ms${(r.attempts ?? 1) > 1 ? ` (${r.attempts} attempts)` : ''}${r.stderr ? `: ${r.stderr.trim()}` : ''}`),
          { jobId: o.jobId, watchdog: true },
        ),
      )
    : NO_WATCHDOG;
  const disk = watchDiskWrites(sandbox, o.diskWriteBytes, o.diskPollMs);
  try {
    // A cancel or timeout that landed while the sandbox was being prepared found nothing to kill.
    if (o.stopped()) void sandbox.kill(o.graceMs);
    // stdin is always a pipe: write what was given, then close, so readers see EOF (an interactive job's stays open).
    child.stdin?.on('error', () => {}); // the job may exit without reading it
    if (o.keepStdin && child.stdin) {
      if (stdin) child.stdin.write(stdin);
      o.keepStdin(child.stdin);
    } else if (noStdin) child.stdin?.end();
    else child.stdin?.end(stdin);
    const statusText = readSome(status, 64);
    const reading = Promise.all([caps.stdout.consume(child.stdout as Readable), caps.stderr.consume(child.stderr as Readable)]);
    const end = await ended;
    const drainedWithin = (ms: number) => Promise.race([reading.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), ms))]);
    if (!(await drainedWithin(30))) {
      // Something still holds the pipes (a background or escaped grandchild): everything left
      // in the sandbox dies now; if the pipes still stay open, stop reading rather than wait.
      await sandbox.kill(0);
      if (!(await drainedWithin(o.drainMs))) {
        child.stdout?.destroy();
        child.stderr?.destroy();
        await reading;
      }
    }
    // After the process is gone nothing holds the status pipe's write end: its EOF is near.
    await Promise.race([statusText, new Promise((r) => setTimeout(r, 1000))]);
    status?.destroy();
    return { end, buildStatus: parseBuildStatus(await statusText), startedAt, diskExceeded: disk.exceeded(), memoryHit: disk.memoryHit() };
  } finally {
    disk.stop();
    watchdog.disarm();
  }
}

/** Up to `max` bytes from `src` until it ends (or is destroyed); '' for no stream. */
async function readSome(src: Readable | null, max: number): Promise<string> {
  if (!src) return '';
  let text = '';
  try {
    for await (const chunk of src as AsyncIterable<Buffer>) {
      if (text.length < max) text += chunk.toString('latin1').slice(0, max - text.length);
      if (text.includes('\n')) break;
    }
  } catch {
    /* destroyed: what we have */
  }
  return text;
}
