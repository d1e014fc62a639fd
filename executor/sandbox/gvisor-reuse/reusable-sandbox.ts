/**
 * One sandbox running the reuse init (init.py), and the frame channel to it: it reads the init's
 * frames, hands a job's to its lease (lease.ts) and goes back to its pool, or away, when the lease
 * is over. It reaches the pool only through `ReuseHome`, so it does not import the pool.
 */
import type { ChildProcess } from 'node:child_process';
import type { ResourceLimits } from '../types.ts';
import type { SandboxReuse } from '../../../src/contracts/sandbox-reuse.ts';
import type { GvisorSandbox } from '../gvisor-sandbox.ts';
import { ReuseLease, type LeaseHolder } from './lease.ts';

/**
 * How long a clean, idle sandbox's init has to end it once its channel closes (the init exits at
 * EOF, and the sandbox with it, in a few ms) before the sandbox is killed the usual way.
 */
const RETIRE_WAIT_MS = 2000;

/** What a reusable sandbox needs of its pool (pool.ts). */
export interface ReuseHome {
  /** `sb` runs a job from now on / no longer. */
  running(sb: ReusableSandbox, on: boolean): void;
  /** `sb` is clean and waits for the next job with its key. */
  park(sb: ReusableSandbox): void;
  /** Starts a sandbox like `like` in the background, for the next job of its key. */
  startSpare(like: ReusableSandbox): void;
  /** `sb`'s job is over; `settled` resolves once it is parked or discarded. */
  returningUntil(sb: ReusableSandbox, settled: Promise<void>): void;
  warn(msg: string): void;
}

/** One sandbox running the reuse init, and the frame channel to it. */
export class ReusableSandbox implements LeaseHolder {
  readonly box: GvisorSandbox;
  readonly key: string;
  readonly expiresAt: number;
  readonly ready: Promise<boolean>;
  readonly limits: ResourceLimits;
  readonly reuse: SandboxReuse;
  /** The per-task workspace it was started with (undefined: the shared root). */
  readonly workspaceDir?: string;
  private readonly maxJobs: number;
  private readonly pool: ReuseHome;
  private readonly channel: ChildProcess;
  private served = 0;
  private buf: Buffer = Buffer.alloc(0);
  private current: ReuseLease | null = null;
  private broken: string | null = null;
  /** The init reported the sandbox clean (ready, or after its last job) and no job has started since. */
  private clean = false;
  private ending: Promise<void> | null = null;
  private onReady: () => void = () => {};

  constructor(pool: ReuseHome, box: GvisorSandbox, key: string, limits: ResourceLimits, reuse: SandboxReuse, workspaceDir?: string) {
    this.workspaceDir = workspaceDir;
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
    this.clean = false;
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
      this.clean = true;
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
    this.clean = keep && !why;
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

  /**
   * Ends the sandbox. A clean one with no job (retired after its jobs or seconds, or no longer
   * wanted) is ended by its own init, which exits when its channel closes: no `runsc kill`, each a
   * runsc process of its own, as a sandbox that may hold something of a job needs.
   */
  discard(): Promise<void> {
    this.ending ??= this.clean && !this.broken && !this.current && this.box.alive() ? this.retire() : this.box.destroy();
    return this.ending;
  }

  private async retire(): Promise<void> {
    this.channel.stdin!.end();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.box.gone, new Promise((r) => (timer = setTimeout(r, RETIRE_WAIT_MS)))]);
    clearTimeout(timer);
    await this.box.destroy();
  }
}
