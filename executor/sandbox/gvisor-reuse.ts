/**
 * Sandbox reuse for gVisor (opt-in by team policy, `sandbox.reuse`): a sandbox whose init is
 * the trusted in-sandbox init (init/reuse-init.ts) runs one job after another. Each job gets a
 * lease — the `Sandbox` the runner sees — and the sandbox goes back to the pool only when the
 * job ended on its own, the init reported the sandbox clean, the memory limit was not hit,
 * and it has run fewer than `reuse.jobs` jobs and is younger than `reuse.seconds`. Anything
 * else (a timeout, a cancel, a kill, a dirty report, a broken channel) discards it.
 *
 * Reuse is only between jobs with the same limits and the same reuse setting (the pool key);
 * an agent serves one team, so a sandbox never passes between teams.
 */
import { availableParallelism } from 'node:os';
import { PassThrough, Writable } from 'node:stream';
import type { ChildProcess } from 'node:child_process';
import { signalName, type LaunchRequest, type ProcessEnd, type ResourceLimits, type Sandbox, type SandboxProcess } from './types.ts';
import type { SandboxReuse } from '../../src/contracts/sandbox-reuse.ts';
import type { GvisorSandbox } from './gvisor-sandbox.ts';
import type { Logger } from '../log.ts';
import { delay } from './exec-util.ts';

/** What the driver gives the pool: a way to start a sandbox whose init is the reuse init. */
export interface ReuseHost {
  createReusable(limits: ResourceLimits): GvisorSandbox;
  closed(): boolean;
}

/** Largest stdin frame (the init reads its channel in 64 KiB pieces anyway). */
const STDIN_FRAME = 256 * 1024;
/** How long the init may take to report a sandbox clean after a job before it is discarded. */
const CLEAN_REPORT_MS = 5000;
/**
 * Most idle reusable sandboxes kept at once; more are discarded. There are never more than the
 * agent's peak of concurrent jobs anyway (plus spares); this only bounds a burst's leftovers,
 * which otherwise wait for their `seconds` to run out.
 */
const MAX_PARKED = 64;
/**
 * Spare sandboxes started at once in the background: a start is mostly CPU (runsc boot, the
 * init's interpreter), so more at once than there are CPUs only slows the jobs running.
 */
const MAX_SPARE_STARTS = Math.max(1, availableParallelism() - 1);
/**
 * Sandbox starts in flight at once, for jobs and spares together. A burst of N short jobs used
 * to start N sandboxes at once: on 2 cores each of those ~250 ms CPU starts then took seconds,
 * while the sandboxes already running freed up every ~40 ms. Past this bound a job waits for
 * whichever comes first: a sandbox of its key parked, or a start slot.
 */
export const MAX_STARTS = Math.max(1, availableParallelism());
/**
 * Sandboxes of one key running short jobs at once, past which a new job waits for one of them
 * instead of starting another. Each sandbox's sentry and its job compete for the same CPUs: 16
 * clients of `true` on 2 cores grew the pool to 12 sandboxes and got 29 jobs/s, held to 3 they
 * got 34-37 (bench run by hand: bench/RESULTS.md). One more than the CPUs keeps every CPU busy while a
 * sandbox waits on its channel.
 */
export const MAX_SHORT_BUSY = availableParallelism() + 1;
/**
 * A job running this long no longer counts as short: it may run for minutes, and a job behind it
 * starts its own sandbox rather than wait (about two cold starts here).
 */
export const SHORT_JOB_MS = 500;
/** Upper bound of one wait for a slot before looking again (a missed wake-up cannot stall a job). */
const SLOT_RECHECK_MS = 250;
/** A sandbox this close to its end of life (`reuse.seconds`) gets its replacement started. */
const RETIRE_AHEAD_MS = 2000;
/**
 * A sandbox with this many jobs left (`reuse.jobs`) gets its replacement started: a start takes
 * ~250 ms here, about as long as 5-8 back-to-back short jobs, so under sustained load the next
 * job finds the replacement ready instead of waiting for a cold start (the p99 of a run).
 */
export const RETIRE_AHEAD_JOBS = 8;

type CleanReport = { ok: boolean; why?: string | null };

const keyOf = (limits: ResourceLimits, reuse: SandboxReuse) => JSON.stringify([limits, reuse]);

export class ReusePool {
  private readonly parked: ReusableSandbox[] = [];
  /** Sandboxes whose job just ended, until the init's clean report parks or discards them. */
  private readonly returning = new Map<ReusableSandbox, Promise<void>>();
  /** Spares being started for a key whose sandbox left (discarded, or at its end of life). */
  private readonly starting = new Map<ReusableSandbox, Promise<void>>();
  /** Sandboxes running a job, with when the job started. */
  private readonly busy = new Map<ReusableSandbox, number>();
  /** Starts for jobs (not spares) in flight, by key. */
  private readonly creating = new Map<string, number>();
  /** Jobs waiting for a parked sandbox or a start slot: woken when either may have appeared. */
  private waiters: (() => void)[] = [];
  private readonly host: ReuseHost;
  private readonly log: Logger;

  constructor(host: ReuseHost, log: Logger) {
    this.host = host;
    this.log = log;
  }

  /** A lease on a clean parked sandbox with the same key, or on a new one. */
  async acquire(jobId: string, limits: ResourceLimits, reuse: SandboxReuse): Promise<Sandbox> {
    const key = keyOf(limits, reuse);
    for (;;) {
      const i = this.parked.findIndex((s) => s.key === key);
      if (i >= 0) {
        const [sb] = this.parked.splice(i, 1);
        if (sb.usable()) return this.lease(sb, jobId);
        void sb.discard();
        continue;
      }
      // A sandbox of the previous job is a few ms from its clean report, a spare is already
      // starting: waiting for either beats a cold start.
      const near = [...this.returning, ...this.starting].filter(([s]) => s.key === key).map(([, p]) => p);
      if (near.length) {
        await Promise.race(near);
        continue;
      }
      // Enough sandboxes of this key run short jobs: one of them frees sooner than a cold start.
      const now = Date.now();
      const short = [...this.busy].filter(([s, t]) => s.key === key && now - t < SHORT_JOB_MS).map(([, t]) => t);
      if (short.length && short.length + (this.creating.get(key) ?? 0) >= MAX_SHORT_BUSY && !this.host.closed()) {
        const turnsLong = Math.min(...short) + SHORT_JOB_MS - now;
        await Promise.race([new Promise<void>((r) => this.waiters.push(r)), delay(Math.min(SLOT_RECHECK_MS, turnsLong + 1))]);
        continue;
      }
      if (this.startsInFlight() < MAX_STARTS || this.host.closed()) break;
      await Promise.race([new Promise<void>((r) => this.waiters.push(r)), delay(SLOT_RECHECK_MS)]);
    }
    this.creating.set(key, (this.creating.get(key) ?? 0) + 1);
    let sb: ReusableSandbox;
    let ok: boolean;
    try {
      sb = new ReusableSandbox(this, this.host.createReusable(limits), key, limits, reuse);
      ok = await sb.ready;
    } finally {
      const n = this.creating.get(key)! - 1;
      if (n) this.creating.set(key, n);
      else this.creating.delete(key);
      this.wake();
    }
    if (!ok) {
      const why = sb.box.startError();
      await sb.discard();
      throw new Error(why);
    }
    return this.lease(sb, jobId);
  }

  private startsInFlight(): number {
    let n = this.starting.size;
    for (const c of this.creating.values()) n += c;
    return n;
  }

  /** `sb` runs a job from now on / no longer. */
  running(sb: ReusableSandbox, on: boolean): void {
    if (on) this.busy.set(sb, Date.now());
    else if (this.busy.delete(sb)) this.wake();
  }

  /** Something parked or a start slot freed: every waiting job looks again. */
  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private lease(sb: ReusableSandbox, jobId: string): Sandbox {
    const lease = sb.lease(jobId);
    // Near its end: the replacement starts now, so the job after its last does not wait for a cold start.
    if (sb.nearEnd(RETIRE_AHEAD_JOBS, RETIRE_AHEAD_MS)) this.startSpare(sb);
    return lease;
  }

  /** Starts a sandbox like `like` in the background and parks it, unless one is parked or starting already. */
  startSpare(like: ReusableSandbox): void {
    if (this.host.closed() || this.starting.size >= MAX_SPARE_STARTS) return;
    if ([...this.parked, ...this.starting.keys()].some((s) => s.key === like.key && s !== like)) return;
    const sb = new ReusableSandbox(this, this.host.createReusable(like.limits), like.key, like.limits, like.reuse);
    const settled = sb.ready.then((ok) => {
      this.starting.delete(sb);
      if (ok) this.park(sb);
      else void sb.discard();
      this.wake();
    });
    this.starting.set(sb, settled);
  }

  /** Whether `box` is waiting in the pool (not running a job, not being torn down). */
  holds(box: GvisorSandbox): boolean {
    return this.parked.some((s) => s.box === box);
  }

  /** `sb`'s job is over; `settled` resolves once it is parked or discarded. */
  returningUntil(sb: ReusableSandbox, settled: Promise<void>): void {
    const p = settled.finally(() => this.returning.delete(sb));
    this.returning.set(sb, p);
  }

  park(sb: ReusableSandbox): void {
    if (this.host.closed() || !sb.usable() || this.parked.length >= MAX_PARKED) {
      void sb.discard();
      return;
    }
    this.parked.push(sb);
    this.wake();
    // A parked sandbox that outlives its time is discarded even if no job comes.
    const t = setTimeout(
      () => {
        const i = this.parked.indexOf(sb);
        if (i >= 0) {
          this.parked.splice(i, 1);
          void sb.discard();
        }
      },
      Math.max(0, sb.expiresAt - Date.now()),
    );
    t.unref();
  }

  warn(msg: string): void {
    this.log.warn(msg);
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.parked.splice(0).map((s) => s.discard()));
  }
}

/** One sandbox running the reuse init, and the frame channel to it. */
class ReusableSandbox {
  readonly box: GvisorSandbox;
  readonly key: string;
  readonly expiresAt: number;
  readonly ready: Promise<boolean>;
  readonly limits: ResourceLimits;
  readonly reuse: SandboxReuse;
  private readonly maxJobs: number;
  private readonly pool: ReusePool;
  private readonly channel: ChildProcess;
  private served = 0;
  private buf: Buffer = Buffer.alloc(0);
  private current: ReuseLease | null = null;
  private broken: string | null = null;
  private onReady: () => void = () => {};

  constructor(pool: ReusePool, box: GvisorSandbox, key: string, limits: ResourceLimits, reuse: SandboxReuse) {
    this.pool = pool;
    this.limits = limits;
    this.reuse = reuse;
    this.box = box;
    this.key = key;
    this.maxJobs = reuse.jobs;
    this.expiresAt = Date.now() + reuse.seconds * 1000;
    this.channel = box.channel();
    const initReady = new Promise<void>((r) => (this.onReady = r));
    this.ready = box.ready.then((ok) => ok && Promise.race([initReady.then(() => true), box.gone.then(() => false)]));
    this.channel.stdout!.on('data', (d: Buffer) => this.onData(d));
    void box.gone.then(() => this.current?.sandboxGone());
  }

  usable(): boolean {
    return !this.broken && this.box.alive() && this.served < this.maxJobs && Date.now() < this.expiresAt;
  }

  /** Whether at most `jobs` more jobs may run in it, or it reaches its end of life within `ms`. */
  nearEnd(jobs: number, ms: number): boolean {
    return this.maxJobs - this.served <= jobs || Date.now() + ms >= this.expiresAt;
  }

  lease(jobId: string): ReuseLease {
    this.served++;
    this.pool.running(this, true);
    this.current = new ReuseLease(this, jobId);
    return this.current;
  }

  send(type: string, data: Buffer = Buffer.alloc(0)): void {
    const head = Buffer.alloc(5);
    head.write(type, 0, 'latin1');
    head.writeUInt32BE(data.length, 1);
    this.channel.stdin!.write(Buffer.concat([head, data]));
  }

  /** Output backpressure: stop reading the init's channel until the job's reader catches up. */
  pause(): void {
    this.channel.stdout!.pause();
  }
  resume(): void {
    this.channel.stdout!.resume();
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    let off = 0;
    while (this.buf.length - off >= 5) {
      const n = this.buf.readUInt32BE(off + 1);
      if (this.buf.length - off < 5 + n) break;
      const type = String.fromCharCode(this.buf[off]);
      const data = this.buf.subarray(off + 5, off + 5 + n);
      off += 5 + n;
      this.onFrame(type, data);
    }
    this.buf = off === this.buf.length ? Buffer.alloc(0) : this.buf.subarray(off);
  }

  private onFrame(type: string, data: Buffer): void {
    if (type === 'R') {
      this.onReady();
      return;
    }
    if (!this.current) {
      // Nothing but the init writes to this channel; anything unexpected is a reason to stop trusting it.
      this.broken = `unexpected frame "${type}" with no job running`;
      void this.discard();
      return;
    }
    this.current.frame(type, data);
  }

  /** The lease is over: back to the pool, or gone. */
  done(lease: ReuseLease, keep: boolean, why: string | null): void {
    if (this.current === lease) this.current = null;
    this.pool.running(this, false);
    if (why) this.broken = why;
    if (keep && this.usable()) {
      this.pool.park(this);
    } else {
      void this.discard();
      // Its team is still running jobs: have the next sandbox ready before the next job asks.
      this.pool.startSpare(this);
    }
  }

  returning(settled: Promise<void>): void {
    this.pool.returningUntil(this, settled);
  }

  warn(msg: string): void {
    this.pool.warn(`reused sandbox ${this.box.id}: ${msg}`);
  }

  discard(): Promise<void> {
    return this.box.destroy();
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const wellFormed = (s: string) => s.replace(LONE_SURROGATE, '\uFFFD');

/** One job's view of a reusable sandbox. */
class ReuseLease implements Sandbox {
  readonly id: string;
  readonly jobDirHost: string;
  readonly jobDirInside: string;
  readonly workspaceInside: string;
  private readonly sb: ReusableSandbox;
  private readonly failuresAtStart: number;
  private launched = false;
  private killed = false;
  private exited = false;
  private io: { stdout: PassThrough; stderr: PassThrough; status: PassThrough; end: (e: ProcessEnd) => void } | null = null;
  private onClean: (r: CleanReport) => void = () => {};
  private readonly clean = new Promise<CleanReport>((r) => (this.onClean = r));
  private destroying: Promise<void> | null = null;

  constructor(sb: ReusableSandbox, jobId: string) {
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
    const { cwd, env, build, run, rlimits } = req.steps;
    // Lone surrogates become U+FFFD, as a direct spawn encodes them (the init could not encode them).
    this.sb.send(
      'J',
      Buffer.from(JSON.stringify({ cwd, env, build: build ?? null, run, rlimits }, (_k, v: unknown) => (typeof v === 'string' ? wellFormed(v) : v))),
    );
    const sb = this.sb;
    const stdin = new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (let i = 0; i < chunk.length; i += STDIN_FRAME) sb.send('I', chunk.subarray(i, i + STDIN_FRAME));
        cb();
      },
      final(cb) {
        sb.send('i');
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
