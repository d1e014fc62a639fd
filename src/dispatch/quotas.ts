/**
 * The team's quotas and usage, in the team's Durable Object: the quotas an operator set
 * (`setQuotas`, pushed from the directory row: src/operator/teams.ts), the submit-time check
 * (`admitJob`), and the usage figures operators and the team's admins read.
 *
 * Jobs today are counted in memory, seeded once per instance by one COUNT (the job store's, through
 * `UsageSources`): a submit writes no row for it. `admitJob` is a gate of `Jobs.submit` (capabilities.ts). The day is UTC. Past days are rolled up into
 * `usage_days` once (one row per day, at the first submit, read or alarm of a new day), before the
 * job store's retention drops the rows they are counted from, so "this month" outlives that retention.
 *
 * ```ts
 * const quotas = new TeamQuotas(host, { jobs: (a, b) => rows.usageBetween(a, b), calls: …, egressBytes: … });
 * const over = quotas.admitJob(now); // { code: 'quota_exceeded', message } or null
 * ```
 */
import type { Quotas } from '../store/teams.ts';
import { migrate, type Migration, type SqlHost, type TimedWork } from './capability-host.ts';

const DAY_MS = 86_400_000;
/** Past days rolled up when the object has none yet: what the job store still holds (its retention is 7 days). */
const ROLLUP_MAX_DAYS = 8;
const UNBOUNDED = Number.MAX_SAFE_INTEGER;

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-quotas',
    sql: [
      // 'quotas' (Quotas), 'rolled_through' (the last UTC day, as days since the epoch, rolled into usage_days).
      `CREATE TABLE IF NOT EXISTS quota_settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
      `CREATE TABLE IF NOT EXISTS usage_days (day INTEGER PRIMARY KEY, calls INTEGER NOT NULL, jobs INTEGER NOT NULL,
        job_ms INTEGER NOT NULL, egress_bytes INTEGER NOT NULL)`,
    ],
  },
];

/** What the usage figures are counted from: each answered by the capability that owns the rows. */
export interface UsageSources {
  /** Jobs created in [from, to), and the milliseconds run by jobs that ended in [from, to). */
  jobs(from: number, to: number): { jobs: number; jobMs: number };
  /** Calls (rows of the team's audit log) in [from, to). */
  calls(from: number, to: number): number;
  /** Bytes up and down of egress connections that started in [from, to). */
  egressBytes(from: number, to: number): number;
}

interface UsageFigures {
  calls: number;
  jobs: number;
  jobSeconds: number;
  egressBytes: number;
}

export interface TeamUsage {
  /** The UTC day and month the figures are for. */
  day: string;
  month: string;
  today: UsageFigures;
  thisMonth: UsageFigures;
  /** The object's SQLite database (`ctx.storage.sql.databaseSize`). */
  storageBytes: number;
  quotas: Quotas;
}

/**
 * The port `Jobs.submit` calls, as one of its gates (`JobsParts.gates`), for a job it has just recorded:
 * null admits the job (counted), else the refusal it closes the job with.
 */
interface QuotaGate {
  admitJob(now: number): { code: 'quota_exceeded'; message: string } | null;
}

const HOW_TO_RAISE = 'an operator raises it with: gatehouse team quotas <team>';

export class TeamQuotas implements QuotaGate, TimedWork {
  private readonly host: SqlHost;
  private readonly sources: UsageSources;
  private settings: Quotas | null = null;
  /** Jobs submitted on `day` (UTC days since the epoch); null until first needed in this instance. */
  private counted: { day: number; n: number } | null = null;

  constructor(host: SqlHost, sources: UsageSources) {
    this.host = host;
    this.sources = sources;
    migrate(host, 'quotas', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  private setting<T>(key: string): T | null {
    const r = this.sql.exec<{ value: string }>(`SELECT value FROM quota_settings WHERE key = ?`, key).toArray()[0];
    return r ? (JSON.parse(r.value) as T) : null;
  }

  private put(key: string, value: unknown): void {
    this.sql.exec(`INSERT INTO quota_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, JSON.stringify(value));
  }

  quotas(): Quotas {
    this.settings ??= this.setting<Quotas>('quotas') ?? {};
    return this.settings;
  }

  /** The directory's quotas for the team (an operator set them): effective for the next submit. */
  setQuotas(q: Quotas): void {
    this.put('quotas', q);
    this.settings = { ...q };
  }

  admitJob(now: number): { code: 'quota_exceeded'; message: string } | null {
    const q = this.quotas();
    if (q.storageBytes !== undefined) {
      const size = this.sql.databaseSize;
      if (size >= q.storageBytes) {
        return {
          code: 'quota_exceeded',
          message: `the team's storage quota is reached (its object holds ${size} bytes; storageBytes = ${q.storageBytes}): no new job is taken until older jobs expire; ${HOW_TO_RAISE} --storage-bytes <n>`,
        };
      }
    }
    if (q.jobsPerDay === undefined && this.counted === null) return null;
    const counted = this.countJob(now);
    if (q.jobsPerDay !== undefined && counted.n > q.jobsPerDay) {
      counted.n -= 1;
      return {
        code: 'quota_exceeded',
        message: `the team's daily job quota is reached (${counted.n} jobs today of jobsPerDay = ${q.jobsPerDay}; the count starts again at 00:00 UTC); ${HOW_TO_RAISE} --jobs-per-day <n>`,
      };
    }
    return null;
  }

  /**
   * Counts the job at hand into today's jobs: in memory, or — the first time in this instance — from the
   * job store and this one (its gates run before it is recorded; ones a quota refused are not counted).
   */
  private countJob(now: number): { day: number; n: number } {
    const day = Math.floor(now / DAY_MS);
    if (this.counted === null) {
      this.counted = { day, n: this.sources.jobs(day * DAY_MS, UNBOUNDED).jobs + 1 };
    } else if (this.counted.day !== day) {
      // A new day in a running instance: every submit since midnight went through it, this one first.
      this.rollUp(now);
      this.counted = { day, n: 1 };
    } else this.counted.n += 1;
    return this.counted;
  }

  /** Rolls the days before today that are not yet in `usage_days` into it (a row for each day that had any use). */
  private rollUp(now: number): void {
    const today = Math.floor(now / DAY_MS);
    const through = this.setting<number>('rolled_through');
    if (through !== null && through >= today - 1) return;
    const from = Math.max(through === null ? -Infinity : through + 1, today - ROLLUP_MAX_DAYS);
    this.host.transactionSync(() => {
      for (let d = from; d < today; d++) {
        const f = this.figures(d * DAY_MS, (d + 1) * DAY_MS);
        if (f.calls + f.jobs + f.jobMs + f.egressBytes === 0) continue;
        this.sql.exec(
          `INSERT OR REPLACE INTO usage_days (day, calls, jobs, job_ms, egress_bytes) VALUES (?, ?, ?, ?, ?)`,
          d,
          f.calls,
          f.jobs,
          f.jobMs,
          f.egressBytes,
        );
      }
      this.put('rolled_through', today - 1);
    });
  }

  /** The alarm's part: a day the job store is about to drop is rolled up first. */
  onAlarm(now: number): void {
    this.rollUp(now);
  }

  private figures(from: number, to: number): { calls: number; jobs: number; jobMs: number; egressBytes: number } {
    const j = this.sources.jobs(from, to);
    return { calls: this.sources.calls(from, to), jobs: j.jobs, jobMs: j.jobMs, egressBytes: this.sources.egressBytes(from, to) };
  }

  usage(now: number): TeamUsage {
    this.rollUp(now);
    const today = Math.floor(now / DAY_MS);
    const d = new Date(today * DAY_MS);
    const monthStart = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    const live = this.figures(today * DAY_MS, UNBOUNDED);
    const past = this.sql
      .exec<{ calls: number; jobs: number; job_ms: number; egress_bytes: number }>(
        `SELECT COALESCE(SUM(calls), 0) AS calls, COALESCE(SUM(jobs), 0) AS jobs, COALESCE(SUM(job_ms), 0) AS job_ms,
           COALESCE(SUM(egress_bytes), 0) AS egress_bytes FROM usage_days WHERE day >= ? AND day < ?`,
        Math.floor(monthStart / DAY_MS),
        today,
      )
      .one();
    const seconds = (ms: number) => Math.round(ms / 100) / 10;
    return {
      day: d.toISOString().slice(0, 10),
      month: d.toISOString().slice(0, 7),
      today: { calls: live.calls, jobs: live.jobs, jobSeconds: seconds(live.jobMs), egressBytes: live.egressBytes },
      thisMonth: {
        calls: live.calls + past.calls,
        jobs: live.jobs + past.jobs,
        jobSeconds: seconds(live.jobMs + past.job_ms),
        egressBytes: live.egressBytes + past.egress_bytes,
      },
      storageBytes: this.sql.databaseSize,
      quotas: this.quotas(),
    };
  }
}
