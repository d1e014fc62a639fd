/**
 * Output relayed live while a job runs (`job_output`), by byte offset, up to LIVE_OUTPUT_MAX_BYTES
 * per stream, as one contiguous prefix: bytes already kept are skipped (a frame sent again), and a
 * frame that starts past the end (one went missing on a dropped socket) is ignored, so every kept
 * byte sits at its true offset. Stored as BLOB rows below the SQLite row limit.
 *
 * A young job's output is not written at once: a job's first output waits in memory for YOUNG_MS
 * (the pending timer keeps the object from hibernating meanwhile), and is written then only if it is
 * still needed (`stillNeeded`: the job runs, or its exit left the live bytes to stand for a stream).
 * Most jobs end within that time, and their exit carries their output, so they write no output rows.
 * Followers and reads see the buffered bytes like stored ones. An object that restarts within that
 * second (a deploy or a crash) loses the buffered bytes: later frames of that job do not start at the
 * end it knows and are ignored, so its live output stays empty; its exit still carries the inline
 * output and its artifacts the whole streams.
 */
import type { StreamName } from '../contracts/agent-protocol.ts';
import { LIVE_OUTPUT_MAX_BYTES, STORED_OUTPUT_CHUNK_BYTES } from '../contracts/limits.ts';
import { migrate, type Migration, type SqlHost } from './capability-host.ts';

/** The table came with the job tables' first migration (job-tables-v1.ts); IF NOT EXISTS: it stays. */
const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-job-output',
    sql: [
      `CREATE TABLE IF NOT EXISTS job_output (job_id TEXT NOT NULL, stream TEXT NOT NULL, offset INTEGER NOT NULL, bytes INTEGER NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (job_id, stream, offset))`,
    ],
  },
];

/** How long a job's first output waits in memory before it is written (if still needed). */
export const YOUNG_MS = 1000;
/** A young job's buffer is written at once past this many bytes: it is no short job's small output. */
const YOUNG_MAX_BYTES = 256 * 1024;

type Ends = Record<StreamName, number>;
interface Young {
  /** Each stream's bytes from offset 0. */
  parts: Record<StreamName, Uint8Array[]>;
  timer: ReturnType<typeof setTimeout>;
}

const enc = new TextEncoder();

export class LiveOutput {
  private readonly host: SqlHost;
  private readonly stillNeeded: (jobId: string) => boolean;
  private readonly youngMs: number;
  /** The end of each stream's kept output (stored or buffered) as last read or written. */
  private readonly ends = new Map<string, Ends>();
  /** Young jobs' output, not written yet. */
  private readonly young = new Map<string, Young>();
  /** Jobs whose output goes to storage straight away (no longer young). */
  private readonly grown = new Set<string>();

  /** `youngMs` 0: nothing is buffered (every frame is written as it comes). */
  constructor(host: SqlHost, stillNeeded: (jobId: string) => boolean, youngMs = YOUNG_MS) {
    this.host = host;
    this.stillNeeded = stillNeeded;
    this.youngMs = youngMs;
    migrate(host, 'live-output', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** A new job: nothing kept yet. */
  created(id: string): void {
    this.ends.set(id, { stdout: 0, stderr: 0 });
  }

  /** Keeps relayed output at its offset (see the header); returns the bytes kept. */
  append(id: string, stream: StreamName, offset: number, data: Uint8Array): number {
    const end = this.relayed(id, stream);
    if (offset > end) return 0;
    const fresh = data.subarray(Math.min(data.byteLength, end - offset));
    const b = fresh.subarray(0, Math.max(0, LIVE_OUTPUT_MAX_BYTES - end));
    if (b.byteLength === 0) return 0;
    const ends = this.endsOf(id);
    let y = this.young.get(id);
    if (!y && this.youngMs > 0 && !this.grown.has(id) && ends.stdout + ends.stderr === 0) {
      y = { parts: { stdout: [], stderr: [] }, timer: setTimeout(() => this.growLater(id), this.youngMs) };
      this.young.set(id, y);
    }
    if (y) {
      // A copy: the frame's buffer is not ours to keep.
      y.parts[stream].push(b.slice());
      ends[stream] = end + b.byteLength;
      if (ends.stdout + ends.stderr > YOUNG_MAX_BYTES) {
        clearTimeout(y.timer);
        this.grow(id);
      }
      return b.byteLength;
    }
    this.insert(id, stream, end, b);
    ends[stream] = end + b.byteLength;
    return b.byteLength;
  }

  private growLater(id: string): void {
    try {
      this.grow(id);
    } catch (e) {
      // No caller to tell: the live output of this job is what the exit carries.
      console.warn(`job ${id}: its first live output was not stored: ${(e as Error).message}`);
    }
  }

  /** The young job's time is up: its buffered output is written if still needed, and what follows goes straight to storage. */
  private grow(id: string): void {
    const y = this.young.get(id);
    if (!y) return;
    this.young.delete(id);
    if (!this.stillNeeded(id)) {
      this.ends.set(id, { stdout: 0, stderr: 0 });
      return;
    }
    this.grown.add(id);
    for (const stream of ['stdout', 'stderr'] as const) this.insert(id, stream, 0, concat(y.parts[stream]));
  }

  private insert(id: string, stream: StreamName, at: number, b: Uint8Array): void {
    for (let i = 0; i < b.byteLength; i += STORED_OUTPUT_CHUNK_BYTES) {
      const piece = b.subarray(i, i + STORED_OUTPUT_CHUNK_BYTES);
      // A copy of exactly these bytes: a view would hand SQLite the whole buffer.
      this.sql.exec(`INSERT INTO job_output (job_id, stream, offset, bytes, data) VALUES (?, ?, ?, ?, ?)`, id, stream, at + i, piece.byteLength, piece.slice());
    }
  }

  private endsOf(id: string): Ends {
    let e = this.ends.get(id);
    if (!e) {
      const rows = this.sql
        .exec<{ stream: StreamName; n: number }>(`SELECT stream, MAX(offset + bytes) AS n FROM job_output WHERE job_id = ? GROUP BY stream`, id)
        .toArray();
      e = { stdout: 0, stderr: 0 };
      for (const r of rows) e[r.stream] = r.n;
      this.ends.set(id, e);
    }
    return e;
  }

  /** Bytes of the stream kept so far. */
  relayed(id: string, stream: StreamName): number {
    return this.endsOf(id)[stream];
  }

  /** Bytes [offset, offset+max) of the kept output, and the total kept so far. */
  read(id: string, stream: StreamName, offset: number, max: number): { data: Uint8Array; total: number } {
    const total = this.relayed(id, stream);
    const y = this.young.get(id);
    if (y) return { data: concat(y.parts[stream]).slice(offset, offset + max), total };
    if (total === 0 || offset >= total) return { data: new Uint8Array(0), total };
    const rows = this.sql
      .exec<{ offset: number; bytes: number; data: SqlStorageValue }>(
        `SELECT offset, bytes, data FROM job_output WHERE job_id = ? AND stream = ? AND offset + bytes > ? AND offset < ? ORDER BY offset`,
        id,
        stream,
        offset,
        offset + max,
      )
      .toArray();
    return {
      data: concat(
        rows.map((r) => {
          const b = storedBytes(r.data);
          return b.subarray(Math.max(0, offset - r.offset), Math.min(b.byteLength, offset + max - r.offset));
        }),
      ),
      total,
    };
  }

  /** These streams' output is not needed any more (their artifact is stored: it serves them). */
  drop(id: string, streams: readonly StreamName[]): void {
    const y = this.young.get(id);
    if (y) for (const s of streams) y.parts[s] = [];
    // Nothing is stored of a young job, nor of a stream whose known end is 0.
    const ends = this.ends.get(id);
    const stored = y ? [] : streams.filter((s) => !ends || ends[s] > 0);
    if (stored.length) this.sql.exec(`DELETE FROM job_output WHERE job_id = ? AND stream IN (${stored.map(() => '?').join(', ')})`, id, ...stored);
    const e = this.endsOf(id);
    for (const s of streams) e[s] = 0;
  }

  /** Jobs dropped (retention): their output goes too. */
  forget(ids: readonly string[]): void {
    for (const id of ids) {
      const y = this.young.get(id);
      if (y) clearTimeout(y.timer);
      this.young.delete(id);
      this.grown.delete(id);
      this.ends.delete(id);
      this.sql.exec(`DELETE FROM job_output WHERE job_id = ?`, id);
    }
  }
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.byteLength;
  }
  return out;
}

/** A live output row's bytes: a BLOB (ArrayBuffer in workerd, Uint8Array elsewhere), or UTF-8 text in rows stored before output went binary. */
function storedBytes(v: SqlStorageValue | Uint8Array): Uint8Array {
  if (typeof v === 'string') return enc.encode(v);
  if (v instanceof Uint8Array) return v;
  if (v instanceof ArrayBuffer) return new Uint8Array(v);
  return new Uint8Array(0);
}
