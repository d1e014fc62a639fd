/**
 * What the team's object tells operators about its jobs: the metrics points (src/platform/metrics.ts) written as
 * jobs are taken in and end, and the health figures the dashboard shows (`GET /admin/v1/overview`).
 * Counted from what the object holds in memory; kept apart from the job's life (job-lifecycle.ts), which calls it.
 */
import type { Env } from '../env.ts';
import { writeMetric } from '../platform/metrics.ts';
import type { JobRow } from './job-rows.ts';

/** The team's object's own counters, for the dashboard's health section (`GET /admin/v1/overview`). */
export interface DispatchHealth {
  queued: number;
  running: number;
  /** The last job that ended since the object started (memory only: null after a restart until one ends). */
  lastJob: { endedAt: number; durationMs: number; queueWaitMs: number } | null;
  /** What woke this instance of the object since it started (the DO fills it in: team-dispatcher.ts). */
  wakes?: DispatchWakes;
}

/**
 * The object's wake-ups that cost an idle team: agent messages (`webSocketMessage`) and alarms, counted
 * in memory since `since` (when this instance started; a hibernated object starts a new one). An idle
 * team's agents' pings are answered by the platform and count nothing.
 */
interface DispatchWakes {
  since: number;
  messages: number;
  alarms: number;
}

/** Where the team stands when a job is taken in or ends. */
export interface TeamCounters {
  queued: number;
  running: number;
  agents: number;
  slots: number;
}

export class JobMetrics {
  private lastJob: DispatchHealth['lastJob'] = null;
  /** The counters of the last `team` metric point written (queued/running/agents/slots). */
  private lastCounters = '';

  private readonly host: { env: Env; team(): Promise<string> };

  constructor(host: { env: Env; team(): Promise<string> }) {
    this.host = host;
  }

  /** The team's counters at every job taken in or ended, and an ended job's own point (its duration and queue wait). */
  observe(ended: Readonly<JobRow> | null, endedAt: number, counters: TeamCounters): void {
    const timing = ended && {
      duration_ms: ended.started_at === null ? 0 : endedAt - ended.started_at,
      queue_wait_ms: (ended.started_at ?? endedAt) - ended.created_at,
    };
    if (timing) this.lastJob = { endedAt, durationMs: timing.duration_ms, queueWaitMs: timing.queue_wait_ms };
    const env = this.host.env;
    if (!env.METRICS) return;
    void this.host.team().then((team) => {
      if (ended && timing) {
        writeMetric(env, 'job', team, { state: ended.state, sandbox: ended.sandbox, agent: ended.agent, tool: ended.tool, error: ended.error_code }, timing);
      }
      // The counters are a gauge: written when they differ from the last point this instance wrote. A job placed
      // at once writes none at its submit (its end's point, if any, says where the team stands).
      const key = `${counters.queued}/${counters.running}/${counters.agents}/${counters.slots}`;
      if ((ended || counters.queued > 0) && key !== this.lastCounters) {
        this.lastCounters = key;
        writeMetric(env, 'team', team, { at: ended ? 'end' : 'submit' }, counters);
      }
    });
  }

  health(counts: { queued: number; running: number }): DispatchHealth {
    return { ...counts, lastJob: this.lastJob };
  }
}
