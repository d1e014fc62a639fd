/**
 * Sandbox reuse for gVisor (opt-in by team policy, `sandbox.reuse`): a sandbox whose init is
 * the trusted in-sandbox init (init.py) runs one job after another. Each job gets a lease
 * (lease.ts) — the `Sandbox` the runner sees — and the sandbox (reusable-sandbox.ts) goes back to
 * this pool only when the job ended on its own, the init reported the sandbox clean, the memory
 * limit was not hit, and it has run fewer than `reuse.jobs` jobs and is younger than
 * `reuse.seconds`. Anything else (a timeout, a cancel, a kill, a dirty report, a broken channel)
 * discards it.
 *
 * Reuse is only between jobs with the same limits and the same reuse setting (the pool key);
 * an agent serves one team, so a sandbox never passes between teams.
 *
 * This file decides which sandbox a job gets, when spares start and what stays parked. Imports go
 * one way: pool → reusable sandbox → lease.
 */
import { availableParallelism } from 'node:os';
import type { ResourceLimits, Sandbox } from '../types.ts';
import type { SandboxReuse } from '../../../src/contracts/sandbox-reuse.ts';
import type { GvisorSandbox } from '../gvisor-sandbox.ts';
import type { Logger } from '../../log.ts';
import { delay } from '../exec-util.ts';
import { ReusableSandbox, type ReuseHome } from './reusable-sandbox.ts';

/** What the driver gives the pool: a way to start a sandbox whose init is the reuse init. */
export interface ReuseHost {
  /** `workspaceDir`: the job's own workspace, bind-mounted instead of the shared root. */
  createReusable(limits: ResourceLimits, workspaceDir?: string): GvisorSandbox;
  closed(): boolean;
}
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

/** A sandbox serves the jobs of one key: same limits, same reuse setting, same workspace (mounted when it started). */
const keyOf = (limits: ResourceLimits, reuse: SandboxReuse, workspaceDir?: string) => JSON.stringify([limits, reuse, workspaceDir ?? null]);
/**
 * Parked sandboxes of per-task workspaces kept at once: each pins its workspace's mount, and a team
 * may have many workspaces; the shared root's sandboxes keep the rest of MAX_PARKED. Past it, the
 * workspace sandbox parked longest ago (the least recently used) is stopped to make room.
 */
export const MAX_PARKED_WORKSPACE = 8;

export class ReusePool implements ReuseHome {
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
  async acquire(jobId: string, limits: ResourceLimits, reuse: SandboxReuse, workspaceDir?: string): Promise<Sandbox> {
    const key = keyOf(limits, reuse, workspaceDir);
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
      sb = new ReusableSandbox(this, this.host.createReusable(limits, workspaceDir), key, limits, reuse, workspaceDir);
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
    const sb = new ReusableSandbox(this, this.host.createReusable(like.limits, like.workspaceDir), like.key, like.limits, like.reuse, like.workspaceDir);
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
    // `parked` is in the order sandboxes came back: the first workspace one is the least recently used.
    if (sb.workspaceDir && this.parked.filter((s) => s.workspaceDir).length >= MAX_PARKED_WORKSPACE) {
      const lru = this.parked.findIndex((s) => s.workspaceDir);
      const [old] = this.parked.splice(lru, 1);
      void old.discard();
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

  /** A workspace is deleted: its parked sandboxes go (they hold its directory mounted). */
  async dropWorkspace(workspaceDir: string): Promise<void> {
    const gone = this.parked.filter((s) => s.workspaceDir === workspaceDir);
    for (const s of gone) this.parked.splice(this.parked.indexOf(s), 1);
    await Promise.allSettled(gone.map((s) => s.discard()));
  }

  warn(msg: string): void {
    this.log.warn(msg);
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.parked.splice(0).map((s) => s.discard()));
  }
}
