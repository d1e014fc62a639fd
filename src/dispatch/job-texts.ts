/**
 * A job's texts too large for its row (`job_blobs`), in chunks below the 2 MB row limit: a spec
 * over SPEC_ROW_MAX_CHARS, the inline stdout/stderr of a result over EXIT_ROW_INLINE_CHARS, and the
 * parts of an exit too large for one agent message (kept until the exit arrives). Most jobs have none.
 */
import type { StreamName } from '../contracts/agent-protocol.ts';
import { STORED_CHUNK_CHARS, splitText } from '../contracts/limits.ts';
import { SQLITE_BOUND_PARAMETERS_MAX } from '../platform/limits.ts';
import { migrate, type Migration, type SqlHost } from './capability-host.ts';

/** The table itself came with the job tables' first migration (job-tables-v1.ts); IF NOT EXISTS: it stays. */
const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-job-blobs',
    sql: [
      `CREATE TABLE IF NOT EXISTS job_blobs (job_id TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (job_id, kind, seq))`,
    ],
  },
];

export class JobTexts {
  private readonly host: SqlHost;
  /** Jobs created by this instance with no exit parts stored: their end has none to delete. */
  private readonly partless = new Set<string>();

  constructor(host: SqlHost) {
    this.host = host;
    migrate(host, 'job-texts', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** Drops what memory knows (a transaction was rolled back). */
  reset(): void {
    this.partless.clear();
  }

  /** A new job: no texts yet; its spec when it did not fit its row. */
  created(id: string, spec: string | null): void {
    this.partless.add(id);
    if (spec !== null) this.insert(id, [['spec', spec]]);
  }

  spec(id: string): string | null {
    return this.read(id, ['spec']).get('spec') ?? null;
  }

  /** A result's inline output too large for the job's row. */
  putOutput(id: string, stdout: string, stderr: string): void {
    this.sql.exec(`DELETE FROM job_blobs WHERE job_id = ? AND kind IN ('stdout', 'stderr')`, id);
    this.insert(id, [
      ['stdout', stdout],
      ['stderr', stderr],
    ]);
  }

  output(id: string): { stdout: string; stderr: string } {
    const t = this.read(id, ['stdout', 'stderr']);
    return { stdout: t.get('stdout') ?? '', stderr: t.get('stderr') ?? '' };
  }

  // ---- exit parts: inline output too large for one agent message arrives first in parts ----

  putPart(id: string, stream: StreamName, seq: number, data: string): void {
    this.partless.delete(id);
    this.sql.exec(`INSERT OR REPLACE INTO job_blobs (job_id, kind, seq, data) VALUES (?, ?, ?, ?)`, id, `part:${stream}`, seq, data);
  }

  partsText(id: string, stream: StreamName, count: number): string | null {
    const rows = this.sql
      .exec<{ seq: number; data: string }>(`SELECT seq, data FROM job_blobs WHERE job_id = ? AND kind = ? ORDER BY seq`, id, `part:${stream}`)
      .toArray();
    if (rows.length !== count || rows.some((r, i) => r.seq !== i)) return null;
    return rows.map((r) => r.data).join('');
  }

  /** The job ended: its exit parts are not needed any more. */
  dropParts(id: string): void {
    if (this.partless.delete(id)) return;
    this.sql.exec(`DELETE FROM job_blobs WHERE job_id = ? AND kind LIKE 'part:%'`, id);
  }

  /** Jobs dropped (retention): their texts go too. */
  drop(ids: readonly string[]): void {
    for (const id of ids) {
      this.partless.delete(id);
      this.sql.exec(`DELETE FROM job_blobs WHERE job_id = ?`, id);
    }
  }

  /**
   * Stores texts under kinds the job has none of, in as few statements as the limits allow: chunks
   * together up to one row's worth of text, within the bound-parameter limit.
   */
  private insert(id: string, texts: [kind: string, text: string][]): void {
    const rows = texts.flatMap(([kind, text]) => splitText(text, STORED_CHUNK_CHARS).map((data, seq) => [id, kind, seq, data] as const));
    const maxRows = Math.floor(SQLITE_BOUND_PARAMETERS_MAX / 4);
    let batch: (typeof rows)[number][] = [];
    let chars = 0;
    const flush = () => {
      if (batch.length) this.sql.exec(`INSERT INTO job_blobs (job_id, kind, seq, data) VALUES ${batch.map(() => '(?, ?, ?, ?)').join(', ')}`, ...batch.flat());
      batch = [];
      chars = 0;
    };
    for (const row of rows) {
      if (batch.length === maxRows || chars + row[3].length > STORED_CHUNK_CHARS) flush();
      batch.push(row);
      chars += row[3].length;
    }
    flush();
  }

  /** Several kinds of a job's chunked text in one statement; a kind with no chunks is absent. */
  private read(id: string, kinds: string[]): Map<string, string> {
    const rows = this.sql
      .exec<{ kind: string; data: string }>(
        `SELECT kind, data FROM job_blobs WHERE job_id = ? AND kind IN (${kinds.map(() => '?').join(', ')}) ORDER BY kind, seq`,
        id,
        ...kinds,
      )
      .toArray();
    const out = new Map<string, string>();
    for (const r of rows) out.set(r.kind, (out.get(r.kind) ?? '') + r.data);
    return out;
  }
}
