/**
 * Multipart artifact uploads in progress, in the team Durable Object's SQLite: which R2 upload
 * holds a job stream's parts, its shape (size, part size) and the parts stored so far with their
 * ETags. So an upload resumes after an agent reconnect (or a retry of the whole upload) with the
 * parts the edge already holds, `complete` needs nothing from the agent's memory, and an upload
 * that will never complete can be found and aborted.
 */
import type { StreamName } from '../contracts/agent-protocol.ts';
import type { SqlHost } from './job-store.ts';

export interface UploadRow {
  job_id: string;
  stream: StreamName;
  upload_id: string;
  r2_key: string;
  bytes: number;
  part_bytes: number;
  lines: number;
  truncated: number;
  created_at: number;
}

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS artifact_uploads (job_id TEXT NOT NULL, stream TEXT NOT NULL, upload_id TEXT NOT NULL, r2_key TEXT NOT NULL,
    bytes INTEGER NOT NULL, part_bytes INTEGER NOT NULL, lines INTEGER NOT NULL, truncated INTEGER NOT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, stream))`,
  `CREATE TABLE IF NOT EXISTS artifact_parts (job_id TEXT NOT NULL, stream TEXT NOT NULL, part INTEGER NOT NULL, etag TEXT NOT NULL,
    bytes INTEGER NOT NULL, PRIMARY KEY (job_id, stream, part))`,
];

export class UploadStore {
  private readonly host: SqlHost;

  constructor(host: SqlHost) {
    this.host = host;
    for (const s of SCHEMA) host.sql.exec(s);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  get(jobId: string, stream: StreamName): UploadRow | null {
    return this.sql.exec<UploadRow & Record<string, SqlStorageValue>>(`SELECT * FROM artifact_uploads WHERE job_id = ? AND stream = ?`, jobId, stream).toArray()[0] ?? null;
  }

  /** Records a new R2 upload for the stream (replacing an older one the caller has aborted), with no parts yet. */
  put(r: UploadRow): void {
    this.host.transactionSync(() => {
      this.sql.exec(`DELETE FROM artifact_parts WHERE job_id = ? AND stream = ?`, r.job_id, r.stream);
      this.sql.exec(
        `INSERT OR REPLACE INTO artifact_uploads (job_id, stream, upload_id, r2_key, bytes, part_bytes, lines, truncated, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        r.job_id, r.stream, r.upload_id, r.r2_key, r.bytes, r.part_bytes, r.lines, r.truncated, r.created_at,
      );
    });
  }

  /** A part R2 stored; a part sent again replaces its ETag. Ignored unless `uploadId` is still the stream's upload. */
  putPart(jobId: string, stream: StreamName, uploadId: string, part: number, etag: string, bytes: number): boolean {
    if (this.get(jobId, stream)?.upload_id !== uploadId) return false;
    this.sql.exec(`INSERT OR REPLACE INTO artifact_parts (job_id, stream, part, etag, bytes) VALUES (?, ?, ?, ?, ?)`, jobId, stream, part, etag, bytes);
    return true;
  }

  parts(jobId: string, stream: StreamName): { part: number; etag: string; bytes: number }[] {
    return this.sql.exec<{ part: number; etag: string; bytes: number }>(
      `SELECT part, etag, bytes FROM artifact_parts WHERE job_id = ? AND stream = ? ORDER BY part`, jobId, stream,
    ).toArray();
  }

  remove(jobId: string, stream: StreamName): void {
    this.host.transactionSync(() => {
      this.sql.exec(`DELETE FROM artifact_parts WHERE job_id = ? AND stream = ?`, jobId, stream);
      this.sql.exec(`DELETE FROM artifact_uploads WHERE job_id = ? AND stream = ?`, jobId, stream);
    });
  }

  /**
   * Uploads that will never complete: their stream's artifact is no longer uploading (given up,
   * or the agent was lost), or their job is gone (pruned).
   */
  abandoned(): UploadRow[] {
    return this.sql.exec<UploadRow & Record<string, SqlStorageValue>>(
      `SELECT u.* FROM artifact_uploads u LEFT JOIN job_artifacts a ON a.job_id = u.job_id AND a.stream = u.stream
       WHERE a.state IS NULL OR a.state <> 'uploading'`,
    ).toArray();
  }
}
