/**
 * The D1 mirror of the team's jobs: each job's row in the team-wide index and its call's audit
 * row, copied from the job store in the background (one pass: src/dispatch/d1-copy.ts). The job
 * store is the durable record meanwhile: which rows are not copied yet is in its table, so a
 * restarted object copies them at its next alarm.
 */
import { syncJobToD1 } from '../store/jobs.ts';
import type { WorkersPlan } from '../platform/limits.ts';
import { copyPending, copyQueryBudget } from './d1-copy.ts';
import type { DispatchHost, Wakes } from './host.ts';
import type { JobStore } from './job-store.ts';

/** How long a started job's `running` state waits before it is copied to D1 (its end, if sooner, is copied instead). */
const START_SYNC_DELAY_MS = 250;
/** A copy pass that stopped at its D1 query budget goes on in an alarm this soon. */
export const COPY_AGAIN_AFTER_MS = 50;

/** What the mirror needs of the jobs: the rows to copy, what D1 gets of each, and the mark that it was copied. */
export type MirroredJobs = Pick<JobStore, 'unsynced' | 'view' | 'd1Record' | 'markSynced'>;

export class D1Mirror implements Wakes {
  private readonly host: Pick<DispatchHost, 'env' | 'team' | 'heartbeatMs' | 'wake'>;
  private readonly jobs: MirroredJobs;
  private readonly plan: WorkersPlan;
  private syncing = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** The last pass stopped at its query budget with rows left: the next goes on in a new invocation. */
  private budgetLeftRows = false;

  constructor(host: Pick<DispatchHost, 'env' | 'team' | 'heartbeatMs' | 'wake'>, jobs: MirroredJobs, plan: WorkersPlan) {
    this.host = host;
    this.jobs = jobs;
    this.plan = plan;
  }

  /**
   * A started job's `running` reaches D1 a moment later: a short job has ended by then, and one
   * D1 write carries its end instead of two (its start, then its end) — one storage call less on
   * the gateway per short job. The alarm retries whatever is still unsynced.
   */
  soon(): void {
    this.timer ??= setTimeout(() => {
      this.timer = null;
      void this.sync();
    }, START_SYNC_DELAY_MS);
  }

  /** Copies job rows that changed into D1 (the team-wide index and the audit log): see copyPending. */
  async sync(): Promise<void> {
    if (this.syncing) return;
    this.syncing = true;
    try {
      const team = await this.host.team();
      const pass = await copyPending({
        pending: () => this.jobs.unsynced(),
        // A job's copy is its two UPDATEs, and the two INSERTs that create its rows the first time.
        cost: (row) => (row.d1_created ? 2 : 4),
        maxQueries: copyQueryBudget(this.plan),
        copy: async (row) => {
          await syncJobToD1(
            this.host.env.DB,
            team,
            this.jobs.view(row),
            row.audit_id !== null ? { id: row.audit_id } : { jobId: row.id },
            this.jobs.d1Record(row),
          );
          this.jobs.markSynced(row.id, row.state);
        },
        onError: (row, e) => console.error(`job bookkeeping failed for ${row.id}: ${(e as Error).message}; retried at the next alarm`),
      });
      this.budgetLeftRows = pass.budgetLeftRows === true;
      // The rest in a new invocation (its own D1 query budget): an alarm right away, not at the next heartbeat.
      if (this.budgetLeftRows) await this.host.wake();
    } finally {
      this.syncing = false;
    }
  }

  nextWake(now: number): number | null {
    if (this.budgetLeftRows) return now + COPY_AGAIN_AFTER_MS;
    return this.jobs.unsynced(1).length > 0 ? now + this.host.heartbeatMs : null;
  }
}
