/**
 * Each job stream's artifact upload state (`job_artifacts`), part of the artifact uploads capability
 * (artifact-uploads.ts): uploading, complete (the edge stored the body) or failed (given up). A stream
 * with no row has not been announced. Written once per stream but for `uploading` → `complete`/`failed`.
 * Memory keeps each job's rows as read or written, and which jobs have an upload running.
 */
import type { StreamName } from '../contracts/agent-protocol.ts';
import { migrate, type Migration, type SqlHost } from './host.ts';

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

export class StreamArtifacts {
  private readonly host: SqlHost;
  private readonly byJob = new Map<string, Map<StreamName, Readonly<StreamUpload>>>();
  /** Jobs with a stream uploading, once read. */
  private uploadingJobs: Set<string> | null = null;

  constructor(host: SqlHost) {
    this.host = host;
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
    return this.of(id).get(stream) ?? null;
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
    if (rows.length === 0 || !this.uploadingJobs) return;
    if ([...this.of(id).values()].some((a) => a.state === 'uploading')) this.uploadingJobs.add(id);
    else this.uploadingJobs.delete(id);
  }

  /** An upload may begin unless this stream's artifact is already complete or given up. */
  begin(id: string, stream: StreamName): boolean {
    const cur = this.row(id, stream);
    if (cur && cur.state !== 'uploading') return false;
    if (!cur) this.write(id, `INSERT INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'uploading', 0)`, id, stream);
    return true;
  }

  /** The edge stored the body: the stream is complete. */
  complete(id: string, stream: StreamName, bytes: number): void {
    this.write(id, `UPDATE job_artifacts SET state = 'complete', bytes = ? WHERE job_id = ? AND stream = ? AND state = 'uploading'`, bytes, id, stream);
  }

  /** The agent's last word on one stream's upload, applied once: failed, unless the edge stored the body already. */
  report(id: string, stream: StreamName): boolean {
    const cur = this.row(id, stream);
    if (cur && cur.state !== 'uploading') return false;
    this.write(id, `INSERT OR REPLACE INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'failed', 0)`, id, stream);
    return true;
  }

  /** The job ended: uploads its exit announced (`pending`) stay open; any other unfinished one never will finish. */
  jobEnded(id: string, pending: readonly StreamName[]): void {
    const arts = this.of(id);
    for (const stream of pending) {
      if (!arts.has(stream)) this.write(id, `INSERT OR IGNORE INTO job_artifacts (job_id, stream, state, bytes) VALUES (?, ?, 'uploading', 0)`, id, stream);
    }
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
    this.write(id, `UPDATE job_artifacts SET state = 'failed' WHERE job_id = ? AND state = 'uploading'`, id);
  }

  hasUploading(id: string): boolean {
    return [...this.of(id).values()].some((a) => a.state === 'uploading');
  }

  /** Jobs with an upload running (read once per instance). */
  uploading(): string[] {
    if (!this.uploadingJobs) {
      this.uploadingJobs = new Set(
        this.sql
          .exec<{ job_id: string }>(`SELECT DISTINCT job_id FROM job_artifacts WHERE state = 'uploading'`)
          .toArray()
          .map((r) => r.job_id),
      );
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
