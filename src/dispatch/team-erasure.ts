/**
 * The end of a team's object (an operator's delete: src/operator/teams.ts): first an export of every
 * table the object's capabilities keep, as NDJSON in R2, then the erasure of its storage. What stays is
 * one key saying the team was deleted (when, by whom): a token of the team that arrives later is
 * refused by it, instead of finding an empty object that would admit it as a new team.
 *
 * This is storage as a whole, below the capabilities (like `ctx.storage.deleteAll()`): it reads every
 * table without knowing whose it is, and never writes one.
 */
import type { Admission } from './admission.ts';

/** The one key a deleted team's object keeps (KV API of `ctx.storage`). */
const DELETED_KEY = 'team-deleted';

export interface TeamDeletion {
  at: number;
  by: string;
}

/** Parts of a multipart export: R2 wants every part but the last the same size, at least 5 MiB. */
const PART_BYTES = 8 * 1024 * 1024;

export interface ObjectExport {
  key: string;
  bytes: number;
  rows: number;
  tables: string[];
}

/** Writes `head`, then one line `{"table", "row"}` per row of every table of the object, to `key` in R2. */
export async function exportObject(sql: SqlStorage, bucket: R2Bucket, key: string, head: Record<string, unknown>): Promise<ObjectExport> {
  const tables = sql
    .exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' ORDER BY name`)
    .toArray()
    .map((r) => r.name);
  const out = new NdjsonUpload(bucket, key);
  let rows = 0;
  try {
    await out.line({ ...head, tables });
    for (const table of tables) {
      for (const row of sql.exec(`SELECT * FROM "${table.replace(/"/g, '""')}"`)) {
        await out.line({ table, row: plain(row) });
        rows += 1;
      }
    }
    return { key, bytes: await out.close(), rows, tables };
  } catch (e) {
    await out.abort();
    throw e;
  }
}

/** A row as JSON can hold it: a BLOB becomes `{ base64 }`. */
function plain(row: Record<string, SqlStorageValue>): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    if (v instanceof ArrayBuffer) {
      let s = '';
      for (const b of new Uint8Array(v)) s += String.fromCharCode(b);
      o[k] = { base64: btoa(s) };
    } else o[k] = v;
  }
  return o;
}

/** Lines into one R2 object: a single put when small, else a multipart upload of equal parts. */
class NdjsonUpload {
  private readonly bucket: R2Bucket;
  private readonly key: string;
  private chunks: Uint8Array[] = [];
  private size = 0;
  private total = 0;
  private upload: R2MultipartUpload | null = null;
  private readonly parts: R2UploadedPart[] = [];
  private readonly encoder = new TextEncoder();

  constructor(bucket: R2Bucket, key: string) {
    this.bucket = bucket;
    this.key = key;
  }

  async line(v: unknown): Promise<void> {
    const b = this.encoder.encode(`${JSON.stringify(v)}\n`);
    this.chunks.push(b);
    this.size += b.byteLength;
    this.total += b.byteLength;
    while (this.size >= PART_BYTES) {
      const all = this.joined();
      this.upload ??= await this.bucket.createMultipartUpload(this.key, { httpMetadata: { contentType: 'application/x-ndjson' } });
      this.parts.push(await this.upload.uploadPart(this.parts.length + 1, all.subarray(0, PART_BYTES)));
      this.chunks = [all.subarray(PART_BYTES)];
      this.size = all.byteLength - PART_BYTES;
    }
  }

  private joined(): Uint8Array {
    const all = new Uint8Array(this.size);
    let at = 0;
    for (const c of this.chunks) {
      all.set(c, at);
      at += c.byteLength;
    }
    return all;
  }

  /** Stores what is left; returns the object's size. */
  async close(): Promise<number> {
    const rest = this.joined();
    if (!this.upload) {
      await this.bucket.put(this.key, rest, { httpMetadata: { contentType: 'application/x-ndjson' } });
    } else {
      if (rest.byteLength) this.parts.push(await this.upload.uploadPart(this.parts.length + 1, rest));
      await this.upload.complete(this.parts);
    }
    return this.total;
  }

  async abort(): Promise<void> {
    await this.upload?.abort().catch(() => {});
  }
}

/** The team's deletion mark, read once per instance (admission asks it on every request). */
export class DeletionMark {
  private readonly storage: DurableObjectStorage;
  /** undefined: not read yet. */
  private mark: TeamDeletion | null | undefined;

  constructor(storage: DurableObjectStorage) {
    this.storage = storage;
  }

  /** When (and by whom) the team was deleted; null: it was not. */
  async read(): Promise<TeamDeletion | null> {
    if (this.mark === undefined) this.mark = (await this.storage.get<TeamDeletion>(DELETED_KEY)) ?? null;
    return this.mark;
  }

  /** A deleted team's admission, or null: every token of the team is refused. */
  async admission(): Promise<Admission | null> {
    const mark = await this.read();
    if (!mark) return null;
    return {
      revoked: false,
      policy: { version: null, updatedAt: null },
      suspended: { ...mark, reason: 'the team was deleted, with its data', deleted: true },
    };
  }

  /** Erases the object's storage (tables, keys, alarm) and keeps only the deletion mark. */
  async erase(mark: TeamDeletion): Promise<void> {
    await this.storage.deleteAlarm();
    await this.storage.deleteAll();
    await this.storage.put(DELETED_KEY, mark);
    this.mark = mark;
  }
}
