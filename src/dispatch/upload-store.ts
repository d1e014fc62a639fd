/**
 * Artifact uploads in the team Durable Object's SQLite:
 * - who may upload a job's artifacts: the upload grant the job's `job.start` carried to the one
 *   agent it was sent to: an HMAC of the job id and the agent id under a random secret the object
 *   keeps once (`upload_secret`), so a job's grant is derived, never stored. Agents of a team may
 *   share one token, so neither the bearer token nor an agent id (which is no secret) says which of
 *   them is asking; only the agent that received `job.start` knows the grant. (`upload_grants`
 *   holds the random grants sent before grants were derived; they stay valid until their job is dropped.)
 * - multipart uploads in progress: which R2 upload holds a job stream's parts, its shape (size,
 *   part size) and the parts stored so far with their ETags. So an upload resumes after an agent
 *   reconnect (or a retry of the whole upload) with the parts the edge already holds, `complete`
 *   needs nothing from the agent's memory, and an upload that will never complete can be found
 *   and aborted.
 */
import { createHmac } from 'node:crypto';
import type { StreamName, UploadGrant } from '../contracts/agent-protocol.ts';
import { migrate, type Migration, type SqlHost } from './capability-host.ts';

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

/** This store's tables. IF NOT EXISTS: an object whose tables predate the migration ledger keeps them. */
const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-uploads',
    sql: [
      `CREATE TABLE IF NOT EXISTS artifact_uploads (job_id TEXT NOT NULL, stream TEXT NOT NULL, upload_id TEXT NOT NULL, r2_key TEXT NOT NULL,
    bytes INTEGER NOT NULL, part_bytes INTEGER NOT NULL, lines INTEGER NOT NULL, truncated INTEGER NOT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, stream))`,
      `CREATE TABLE IF NOT EXISTS artifact_parts (job_id TEXT NOT NULL, stream TEXT NOT NULL, part INTEGER NOT NULL, etag TEXT NOT NULL,
    bytes INTEGER NOT NULL, PRIMARY KEY (job_id, stream, part))`,
      `CREATE TABLE IF NOT EXISTS upload_grants (job_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, token TEXT NOT NULL, created_at INTEGER NOT NULL)`,
    ],
  },
  {
    // A job's grant is derived from this secret (one row, written once): no grant row per job.
    id: '2-upload-secret',
    sql: [`CREATE TABLE IF NOT EXISTS upload_secret (id INTEGER PRIMARY KEY CHECK (id = 1), secret TEXT NOT NULL)`],
  },
];

/** Random bytes of the object's grant secret (256 bits). */
const GRANT_SECRET_BYTES = 32;

/** How an upload's credentials compare with the job's grant. */
export type GrantCheck = 'ok' | 'other_agent' | 'wrong_token';

export class UploadStore {
  private readonly host: SqlHost;
  private secret: string | null = null;
  /** The streams with a multipart upload recorded (`job_id/stream`), once read: most uploads are one PUT and have none to remove. */
  private open: Set<string> | null = null;

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'uploads', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** The object's grant secret, written the first time a grant is made and read once per instance. */
  private secretKey(): string {
    if (this.secret === null) {
      const fresh = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(GRANT_SECRET_BYTES))));
      this.secret =
        this.sql.exec<{ secret: string }>(`SELECT secret FROM upload_secret WHERE id = 1`).toArray()[0]?.secret ??
        this.sql.exec<{ secret: string }>(`INSERT INTO upload_secret (id, secret) VALUES (1, ?) RETURNING secret`, fresh).one().secret;
    }
    return this.secret;
  }

  private derive(jobId: string, agentId: string): string {
    return createHmac('sha256', this.secretKey()).update(`${jobId}\n${agentId}`).digest('base64url');
  }

  /** The upload grant for `jobId` on `agentId` (sent in its `job.start`; the same again if the job is sent to that agent again). */
  grant(jobId: string, agentId: string): UploadGrant {
    return { agentId, token: this.derive(jobId, agentId) };
  }

  /**
   * Whether an upload that says it comes from `agentId` (the agent the job runs on) with `token` holds
   * the job's grant (compared in constant time); a grant stored before grants were derived counts too.
   */
  checkGrant(jobId: string, agentId: string, token: string): GrantCheck {
    if (same(this.derive(jobId, agentId), token)) return 'ok';
    const g = this.sql.exec<{ agent_id: string; token: string }>(`SELECT agent_id, token FROM upload_grants WHERE job_id = ?`, jobId).toArray()[0];
    if (!g) return 'wrong_token';
    if (g.agent_id !== agentId) return 'other_agent';
    return same(g.token, token) ? 'ok' : 'wrong_token';
  }

  /** Forgets the stored grants of jobs dropped (pruned); their open uploads are aborted as abandoned. */
  forgetGrants(jobIds: readonly string[]): void {
    for (const id of jobIds) this.sql.exec(`DELETE FROM upload_grants WHERE job_id = ?`, id);
  }

  get(jobId: string, stream: StreamName): UploadRow | null {
    return (
      this.sql
        .exec<UploadRow & Record<string, SqlStorageValue>>(`SELECT * FROM artifact_uploads WHERE job_id = ? AND stream = ?`, jobId, stream)
        .toArray()[0] ?? null
    );
  }

  /** Records a new R2 upload for the stream (replacing an older one the caller has aborted), with no parts yet. */
  put(r: UploadRow): void {
    this.open?.add(`${r.job_id}/${r.stream}`);
    this.host.transactionSync(() => {
      this.sql.exec(`DELETE FROM artifact_parts WHERE job_id = ? AND stream = ?`, r.job_id, r.stream);
      this.sql.exec(
        `INSERT OR REPLACE INTO artifact_uploads (job_id, stream, upload_id, r2_key, bytes, part_bytes, lines, truncated, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        r.job_id,
        r.stream,
        r.upload_id,
        r.r2_key,
        r.bytes,
        r.part_bytes,
        r.lines,
        r.truncated,
        r.created_at,
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
    return this.sql
      .exec<{ part: number; etag: string; bytes: number }>(
        `SELECT part, etag, bytes FROM artifact_parts WHERE job_id = ? AND stream = ? ORDER BY part`,
        jobId,
        stream,
      )
      .toArray();
  }

  remove(jobId: string, stream: StreamName): void {
    this.open ??= new Set(
      this.sql
        .exec<{ job_id: string; stream: string }>(`SELECT job_id, stream FROM artifact_uploads`)
        .toArray()
        .map((r) => `${r.job_id}/${r.stream}`),
    );
    if (!this.open.delete(`${jobId}/${stream}`)) return;
    this.host.transactionSync(() => {
      this.sql.exec(`DELETE FROM artifact_parts WHERE job_id = ? AND stream = ?`, jobId, stream);
      this.sql.exec(`DELETE FROM artifact_uploads WHERE job_id = ? AND stream = ?`, jobId, stream);
    });
  }

  /** Every multipart upload in progress (the artifacts capability decides which of them are abandoned). */
  all(): UploadRow[] {
    return this.sql.exec<UploadRow & Record<string, SqlStorageValue>>(`SELECT * FROM artifact_uploads ORDER BY created_at`).toArray();
  }
}

const enc = new TextEncoder();

function same(x: string, y: string): boolean {
  const [a, b] = [enc.encode(x), enc.encode(y)];
  return a.byteLength === b.byteLength && crypto.subtle.timingSafeEqual(a, b);
}
