/**
 * One job's lease on a reusable sandbox: the `Sandbox` the runner sees. It sends the job to the
 * init, turns the init's frames into the job's streams and exit, and decides at its end whether
 * the sandbox may serve another job (only after a clean report, never after a kill). It reaches
 * its sandbox only through `LeaseHolder`.
 */
import { PassThrough, Writable } from 'node:stream';
import { signalName, type LaunchRequest, type ProcessEnd, type Sandbox, type SandboxProcess } from '../types.ts';
import type { GvisorSandbox } from '../gvisor-sandbox.ts';
import { delay } from '../exec-util.ts';

/** What a lease needs of its reusable sandbox (reusable-sandbox.ts). */
export interface LeaseHolder {
  readonly box: GvisorSandbox;
  /** Sends the init one frame. */
  send(type: string, data?: Buffer): void;
  /** Output backpressure: stop / go on reading the init's channel. */
  pause(): void;
  resume(): void;
  /** The lease is over: back to the pool (`keep`), or gone. */
  done(lease: ReuseLease, keep: boolean, why: string | null): void;
  /** The lease's end is under way; `settled` resolves once the sandbox is parked or discarded. */
  returning(settled: Promise<void>): void;
  warn(msg: string): void;
}

/** Largest stdin frame (the init reads its channel in 64 KiB pieces anyway). */
const STDIN_FRAME = 256 * 1024;
/** How long the init may take to report a sandbox clean after a job before it is discarded. */
const CLEAN_REPORT_MS = 5000;

type CleanReport = { ok: boolean; why?: string | null };

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const wellFormed = (s: string) => s.replace(LONE_SURROGATE, '\uFFFD');

/** One job's view of a reusable sandbox. */
export class ReuseLease implements Sandbox {
  readonly id: string;
  readonly jobDirHost: string;
  readonly jobDirInside: string;
  readonly workspaceInside: string;
  private readonly sb: LeaseHolder;
  private readonly failuresAtStart: number;
  private launched = false;
  private killed = false;
  private exited = false;
  private io: { stdout: PassThrough; stderr: PassThrough; status: PassThrough; end: (e: ProcessEnd) => void } | null = null;
  private onClean: (r: CleanReport) => void = () => {};
  private readonly clean = new Promise<CleanReport>((r) => (this.onClean = r));
  private destroying: Promise<void> | null = null;

  constructor(sb: LeaseHolder, jobId: string) {
    this.sb = sb;
    this.id = `${sb.box.id}/${jobId}`;
    this.jobDirHost = sb.box.jobDirHost;
    this.jobDirInside = sb.box.jobDirInside;
    this.workspaceInside = sb.box.workspaceInside;
    this.failuresAtStart = sb.box.memoryFailures();
  }

  launch(req: LaunchRequest): SandboxProcess {
    if (this.launched) throw new Error('a lease runs one job');
    if (!req.steps) throw new Error('a reused sandbox needs the job as steps');
    this.launched = true;
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const status = new PassThrough();
    let end: (e: ProcessEnd) => void = () => {};
    const ended = new Promise<ProcessEnd>((r) => (end = r));
    this.io = { stdout, stderr, status, end };
    const { cwd, env, build, run, rlimits, noStdin } = req.steps;
    // Lone surrogates become U+FFFD, as a direct spawn encodes them (the init could not encode them).
    this.sb.send(
      'J',
      Buffer.from(
        JSON.stringify({ cwd, env, build: build ?? null, run, rlimits, stdin: !noStdin }, (_k, v: unknown) => (typeof v === 'string' ? wellFormed(v) : v)),
      ),
    );
    const sb = this.sb;
    const stdin = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (let i = 0; i < chunk.length; i += STDIN_FRAME) sb.send('I', chunk.subarray(i, i + STDIN_FRAME));
        cb();
      },
      final(cb) {
        if (!noStdin) sb.send('i'); // the init closed a job's stdin at once when it was given none
        cb();
      },
    });
    return { child: { stdin, stdout, stderr } as SandboxProcess['child'], ended, status };
  }

  /** A frame from the init for this job. */
  frame(type: string, data: Buffer): void {
    const io = this.io;
    if (type === 'C') {
      let r: CleanReport;
      try {
        r = JSON.parse(data.toString()) as CleanReport;
      } catch {
        r = { ok: false, why: 'unreadable clean report' };
      }
      this.onClean(r);
      return;
    }
    if (!io) return;
    switch (type) {
      case 'O':
        this.write(io.stdout, data);
        break;
      case 'E':
        this.write(io.stderr, data);
        break;
      case 'o':
        this.unblock(io.stdout);
        io.stdout.end();
        break;
      case 'e':
        this.unblock(io.stderr);
        io.stderr.end();
        break;
      case 'B':
        io.status.end(`build ${data.toString()}\n`);
        break;
      case 'X': {
        this.exited = true;
        io.status.end();
        let e: ProcessEnd;
        try {
          const x = JSON.parse(data.toString()) as { code?: number; signal?: number };
          e = x.signal !== undefined ? { kind: 'signaled', signal: signalName(x.signal) ?? `SIG${x.signal}` } : { kind: 'exited', code: x.code ?? -1 };
        } catch {
          e = { kind: 'exited', code: -1 };
        }
        io.end(e);
        break;
      }
      default:
        this.onClean({ ok: false, why: `unexpected frame "${type}"` });
    }
  }

  /**
   * Output backpressure: while a stream's reader is behind, the init's channel is not read (the
   * init then blocks on its pipe, and the job on its own). An ended stream blocks nothing: an
   * ended Writable never emits 'drain'.
   */
  private readonly blocked = new Set<PassThrough>();
  private write(s: PassThrough, data: Buffer): void {
    if (s.write(data) || this.blocked.has(s)) return;
    this.blocked.add(s);
    this.sb.pause();
    s.once('drain', () => this.unblock(s));
  }

  private unblock(s: PassThrough): void {
    if (this.blocked.delete(s) && !this.blocked.size) this.sb.resume();
  }

  /** The whole sandbox ended (killed, or its init died): the job's streams end with it. */
  sandboxGone(): void {
    this.onClean({ ok: false, why: 'the sandbox ended' });
    const io = this.io;
    if (!io) return;
    io.stdout.end();
    io.stderr.end();
    io.status.end();
    // runsc's status is the init's, never the job's: a kill (timeout, cancel, memory) reads as
    // the signal it was; an init that exited on its own means the job's end is unknown.
    void this.sb.box
      .wrapperEnd()
      .then((e) =>
        io.end(
          e.kind === 'exited' ? { kind: 'spawn_failed', message: `the sandbox's init ended during the job (exit ${e.code}): ${this.sb.box.startError()}` } : e,
        ),
      );
  }

  hostKillArgv(): string[] {
    return this.sb.box.hostKillArgv();
  }
  hostPids(): number[] {
    return this.sb.box.hostPids();
  }
  memoryLimitHit(): boolean {
    return this.sb.box.memoryFailures() > this.failuresAtStart;
  }

  /**
   * Kills the job by killing the whole sandbox: a killed job's sandbox is never reused. Once the
   * init reported the exit there is nothing left to kill (it killed every other process first),
   * so a late kill — the runner's "output still open" check losing a race on a loaded machine —
   * does not cost the sandbox.
   */
  kill(graceMs: number): Promise<void> {
    if (this.exited) return Promise.resolve();
    this.killed = true;
    return this.sb.box.kill(graceMs);
  }

  destroy(): Promise<void> {
    if (this.destroying) return this.destroying;
    this.destroying = (async () => {
      if (!this.launched) {
        this.sb.done(this, !this.killed, null);
        return;
      }
      const report =
        this.killed || !this.exited
          ? { ok: false, why: 'the job was stopped' }
          : await Promise.race([this.clean, delay(CLEAN_REPORT_MS).then(() => ({ ok: false, why: `no clean report within ${CLEAN_REPORT_MS} ms` }))]);
      const memory = this.memoryLimitHit();
      const keep = report.ok && !this.killed && !memory;
      if (!report.ok && report.why && !this.killed) this.sb.warn(`discarded: ${report.why}`);
      this.sb.done(this, keep, keep ? null : (report.why ?? (memory ? 'the memory limit was hit' : 'stopped')));
      if (!keep) await this.sb.box.released;
    })();
    this.sb.returning(this.destroying);
    return this.destroying;
  }
}
