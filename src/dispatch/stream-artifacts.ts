/**
 * Each job stream's artifact upload state (`job_artifacts`), part of the artifact uploads capability
 * (artifact-uploads.ts): uploading, complete (the edge stored the body) or failed (given up). A stream
 * the ended job's exit left uploading (`pendingArtifacts`, stored with the job) is uploading without a
 * row: its row is written once, when it completes or is given up. A stream with neither has not been
 * announced. Memory keeps each job's rows as read or written, and which jobs have an upload running.
 */
import type { StreamName } from '../contracts/agent-protocol.ts';
import { migrate, type Migration, type SqlHost } from './capability-host.ts';

/** The table came with the job tables' first migration (job-tables-v1.ts); IF NOT EXISTS: it stays. */
const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-job-artifacts',
    sql: [
      `CREATE TABLE IF NOT EXISTS job_artifacts (job_id TEXT NOT NULL, stream TEXT NOT NULL, state TEXT NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (job_id, stream))`,
    ],
  },
];

export type StreamUpload = { state: 'uploading' | 'complete' | 'failed'; bytes: number };
type Row = StreamUpload & { stream: StreamName };

/** What the stream states need of the jobs: the streams each ended job's exit left uploading. */
export interface PendingUploads {
  /** The streams the job's exit said were still uploading ([] while it runs, or with none). */
  pendingOf(jobId: string): readonly StreamName[];
  /** Every ended job whose exit left streams uploading, with them (read once per instance). */
  endedWithPending(): { id: string; pending: readonly StreamName[] }[];
}

const STREAMS = ['stdout', 'stderr'] as const;
const UPLOADING: Readonly<StreamUpload> = Object.freeze({ state: 'uploading', bytes: 0 });

export class StreamArtifacts {
  private readonly host: SqlHost;
  private readonly jobs: PendingUploads;
  private readonly byJob = new Map<string, Map<StreamName, Readonly<StreamUpload>>>();
  /** Jobs with a stream uploading, once read. */
  private uploadingJobs: Set<string> | null = null;

  constructor(host: SqlHost, jobs: PendingUploads) {
    this.host = host;
    this.jobs = jobs;
    migrate(host, 'stream-artifacts', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** Drops every copy (a transaction that wrote rows was rolled back). */
  reset(): void {
    this.byJob.clear();
    this.uploadingJobs = null;
  }

  /** A new job: no stream announced. */
  created(id: string): void {
    this.byJob.set(id, new Map());
  }

  row(id: string, stream: StreamName): Readonly<StreamUpload> | null {
    return this.of(id).get(stream) ?? (this.jobs.pendingOf(id).includes(stream) ? UPLOADING : null);
  }

  private of(id: string): ReadonlyMap<StreamName, Readonly<StreamUpload>> {
    let m = this.byJob.get(id);
    if (!m) {
      const rows = this.sql.exec<Row>(`SELECT stream, state, bytes FROM job_artifacts WHERE job_id = ?`, id).toArray();
      m = new Map(rows.map((r) => [r.stream, { state: r.state, bytes: r.bytes }]));
      this.byJob.set(id, m);
    }
    return m;
  }

  /** A write to job `id`'s rows; the rows it wrote, as they are now, replace their copies. */
  private write(id: string, statement: string, ...params: SqlStorageValue[]): void {
    const rows = this.sql.exec<Row>(`${statement} RETURNING stream, state, bytes`, ...params).toArray();
    const m = this.byJob.get(id);
    for (const r of rows) m?.set(r.stream, { state: r.state, bytes: r.bytes });
    if (rows.length) this.recount(id);
  }

  /** Keeps the set of jobs with an upload running right for job `id`. */
  private recount(id: string): void {
    if (!this.uploadingJobs) return;
    if (this.hasUploading(id)) this.uploadingJobs.add(id);
    else this.uploadingJobs.delete(id);
  }

  /** An upload may begin unless this stream's artifact is already complete or given up. */
  begin(id: string, stream: StreamName): boolean {
    const cur = this.row(id, stream);
    if (cur && cur.state !== 'uploading') return false;
    if (!cur) this.write(id, `INSERT INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'uploading', 0)`, id, stream);
    return true;
  }

  /** The edge stored the body of an upload still running: the stream is complete. */
  complete(id: string, stream: StreamName, bytes: number): void {
    if (this.row(id, stream)?.state !== 'uploading') return;
    this.write(
      id,
      `INSERT INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'complete', ?)
       ON CONFLICT (job_id, stream) DO UPDATE SET state = 'complete', bytes = excluded.bytes WHERE job_artifacts.state = 'uploading'`,
      id,
      stream,
      bytes,
    );
  }

  /** The agent's last word on one stream's upload, applied once: failed, unless the edge stored the body already. */
  report(id: string, stream: StreamName): boolean {
    const cur = this.row(id, stream);
    if (cur && cur.state !== 'uploading') return false;
    this.write(id, `INSERT OR REPLACE INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'failed', 0)`, id, stream);
    return true;
  }

  /**
   * The job ended: uploads its exit announced (`pending`, stored with the job) stay open, with no row
   * written; any other unfinished one never will finish.
   */
  jobEnded(id: string, pending: readonly StreamName[]): void {
    const arts = this.of(id);
    if (pending.length) this.recount(id);
    if ([...arts].some(([stream, a]) => a.state === 'uploading' && !pending.includes(stream))) {
      this.write(
        id,
        `UPDATE job_artifacts SET state = 'failed' WHERE job_id = ? AND state = 'uploading' AND stream NOT IN (${pending.map(() => '?').join(', ') || `''`})`,
        id,
        ...pending,
      );
    }
  }

  /** The agent of an ended job is gone for good: its open uploads will never report. */
  failUploads(id: string): void {
    for (const stream of STREAMS) {
      if (this.row(id, stream)?.state === 'uploading')
        this.write(id, `INSERT OR REPLACE INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'failed', 0)`, id, stream);
    }
  }

  hasUploading(id: string): boolean {
    return STREAMS.some((s) => this.row(id, s)?.state === 'uploading');
  }

  /** Jobs with an upload running, read once per instance: rows still uploading, and streams ended jobs left uploading that have no row yet. */
  uploading(): string[] {
    if (!this.uploadingJobs) {
      const ids = new Set(
        this.sql
          .exec<{ job_id: string }>(`SELECT DISTINCT job_id FROM job_artifacts WHERE state = 'uploading'`)
          .toArray()
          .map((r) => r.job_id),
      );
      const pending = this.jobs.endedWithPending();
      if (pending.length) {
        const settled = new Set(
          this.sql
            .exec<{ job_id: string; stream: string }>(`SELECT job_id, stream FROM job_artifacts WHERE state <> 'uploading'`)
            .toArray()
            .map((r) => `${r.job_id}/${r.stream}`),
        );
        for (const j of pending) if (j.pending.some((s) => !settled.has(`${j.id}/${s}`))) ids.add(j.id);
      }
      this.uploadingJobs = ids;
    }
    return [...this.uploadingJobs];
  }

  /** Jobs dropped (retention): their rows go too. */
  forget(ids: readonly string[]): void {
    for (const id of ids) {
      this.byJob.delete(id);
      this.uploadingJobs?.delete(id);
      this.sql.exec(`DELETE FROM job_artifacts WHERE job_id = ?`, id);
    }
  }
}
