/**
 * Counts the billed operations a piece of code makes on the shared stores: D1 queries with the rows
 * they read and wrote, and R2 operations by their billing class. `meteredBindings(env, sink)` hands
 * back an `env` whose `DB` and `ARTIFACTS` count into whatever `sink()` returns at the moment of
 * each call (nothing is counted while it returns undefined); every other binding is the original.
 *
 * ```ts
 * const counts = storageCounts();
 * const env2 = meteredBindings(env, () => counts);
 * await env2.DB.prepare('SELECT 1').first();   // counts.d1Queries === 1, rows from the result's meta
 * ```
 *
 * The edge counts per request (src/edge/call-log.ts: each call line carries its request's counts),
 * the team's Durable Object since it started (src/dispatch/usage.ts). Wrapping allocates nothing
 * until a binding is used: the env view is made once per `env` object, and a statement or an upload
 * is wrapped only when code makes one.
 */

// ---- What is billed, and how (prices: bench/tenants.ts, the cost model) ----

// D1 bills rows read (scanned) and rows written (INSERT, UPDATE, DELETE; an index adds a row), as each
// result's `meta.rows_read` / `meta.rows_written` reports them; a batch is billed per statement:
// https://developers.cloudflare.com/d1/platform/pricing/ ("Definitions").
//
// R2's operation classes. Class A (state-changing): PutObject, CopyObject, ListObjects,
// CreateMultipartUpload, UploadPart, CompleteMultipartUpload, … Class B (reads): GetObject, HeadObject, …
// Free: DeleteObject, AbortMultipartUpload:
// https://developers.cloudflare.com/r2/pricing/ ("Class A operations", "Class B operations", "Free operations").

/** What was counted. */
export interface StorageCounts {
  /** D1 statements sent (a batch counts each of its statements; `exec` counts what D1 says it ran). */
  d1Queries: number;
  /** Rows D1 read (scanned) for them, from each result's meta (`raw()` has no meta: its rows are not counted). */
  d1RowsRead: number;
  /** Rows D1 wrote for them, from each result's meta. */
  d1RowsWritten: number;
  /** R2 Class A operations: put, list, createMultipartUpload, uploadPart, complete. */
  r2ClassA: number;
  /** R2 Class B operations: get, head. */
  r2ClassB: number;
  /** R2 operations that are free: each key deleted, each multipart upload aborted. */
  r2Free: number;
}

export function storageCounts(): StorageCounts {
  return { d1Queries: 0, d1RowsRead: 0, d1RowsWritten: 0, r2ClassA: 0, r2ClassB: 0, r2Free: 0 };
}

/** Where counts go: looked up at each call (the edge's is the current request's). */
export type CountsSink = () => StorageCounts | undefined;

/** The bindings a meter wraps. */
export interface MeteredStores {
  DB: D1Database;
  ARTIFACTS: R2Bucket;
}

const views = new WeakMap<object, { sink: CountsSink; view: object }>();

/**
 * `env` with `DB` and `ARTIFACTS` counting into `sink()`; the same view again for the same `env`
 * and sink (so caches keyed by the env object keep working), and `env` itself when it is a view already.
 */
export function meteredBindings<E extends MeteredStores>(env: E, sink: CountsSink): E {
  if (wrapped.has(env)) return env;
  const known = views.get(env);
  if (known && known.sink === sink) return known.view as E;
  let db: D1Database | undefined;
  let bucket: R2Bucket | undefined;
  const view = new Proxy(env, {
    get(target, key, receiver) {
      if (key === 'DB') return (db ??= target.DB && meterD1(target.DB, sink));
      if (key === 'ARTIFACTS') return (bucket ??= target.ARTIFACTS && meterR2(target.ARTIFACTS, sink));
      return Reflect.get(target, key, receiver);
    },
  });
  wrapped.add(view);
  views.set(env, { sink, view });
  return view;
}

const wrapped = new WeakSet<object>();

// ---------------------------------------------------------------- D1

function addMeta(c: StorageCounts | undefined, meta: Partial<D1Meta> | undefined): void {
  if (!c || !meta) return;
  c.d1RowsRead += Number(meta.rows_read) || 0;
  c.d1RowsWritten += Number(meta.rows_written) || 0;
}

function countQueries(sink: CountsSink, n: number): StorageCounts | undefined {
  const c = sink();
  if (c) c.d1Queries += n;
  return c;
}

/** A D1 database whose statements count into `sink()`. */
function meterD1(db: D1Database, sink: CountsSink): D1Database {
  return new MeteredD1(db, sink) as unknown as D1Database;
}

class MeteredD1 {
  private readonly inner: D1Database | D1DatabaseSession;
  private readonly sink: CountsSink;

  constructor(inner: D1Database | D1DatabaseSession, sink: CountsSink) {
    this.inner = inner;
    this.sink = sink;
  }

  prepare(query: string): D1PreparedStatement {
    return new MeteredStatement(this.inner.prepare(query), this.sink) as unknown as D1PreparedStatement;
  }

  async batch<T = unknown>(statements: D1PreparedStatement[]): Promise<D1Result<T>[]> {
    const c = countQueries(this.sink, statements.length);
    const results = await this.inner.batch<T>(statements.map(unwrap));
    for (const r of results) addMeta(c, r.meta);
    return results;
  }

  async exec(query: string): Promise<D1ExecResult> {
    const c = this.sink();
    const r = await (this.inner as D1Database).exec(query);
    if (c) c.d1Queries += r.count;
    return r;
  }

  withSession(constraintOrBookmark?: string): D1DatabaseSession {
    const session = (this.inner as D1Database).withSession(constraintOrBookmark);
    const metered = new MeteredD1(session, this.sink) as unknown as D1DatabaseSession & { getBookmark?: unknown };
    metered.getBookmark = () => session.getBookmark();
    return metered;
  }

  dump(): Promise<ArrayBuffer> {
    return (this.inner as D1Database).dump();
  }
}

function unwrap(s: D1PreparedStatement): D1PreparedStatement {
  return s instanceof MeteredStatement ? s.inner : s;
}

class MeteredStatement {
  readonly inner: D1PreparedStatement;
  private readonly sink: CountsSink;

  constructor(inner: D1PreparedStatement, sink: CountsSink) {
    this.inner = inner;
    this.sink = sink;
  }

  bind(...values: unknown[]): D1PreparedStatement {
    return new MeteredStatement(this.inner.bind(...values), this.sink) as unknown as D1PreparedStatement;
  }

  /**
   * D1's `first()` returns no meta, so it is answered from `all()`: the same query and the same
   * wire answer (D1's own `first()` fetches the rows and keeps the first), with the rows counted.
   */
  async first<T>(colName?: string): Promise<T | null> {
    const r = await this.all<Record<string, unknown>>();
    const row = r.results[0];
    if (row === undefined) return null;
    if (colName === undefined) return row as T;
    if (!(colName in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${colName})`);
    return (row[colName] ?? null) as T | null;
  }

  async run<T>(): Promise<D1Result<T>> {
    const c = countQueries(this.sink, 1);
    const r = await this.inner.run<T & Record<string, unknown>>();
    addMeta(c, r.meta);
    return r as D1Result<T>;
  }

  async all<T>(): Promise<D1Result<T>> {
    const c = countQueries(this.sink, 1);
    const r = await this.inner.all<T & Record<string, unknown>>();
    addMeta(c, r.meta);
    return r as D1Result<T>;
  }

  raw<T>(options?: { columnNames?: boolean }): Promise<T[]> {
    countQueries(this.sink, 1);
    return this.inner.raw(options as { columnNames?: false }) as Promise<T[]>;
  }
}

// ---------------------------------------------------------------- R2

type Op = 'A' | 'B' | 'free';

function countR2(sink: CountsSink, op: Op, n = 1): void {
  const c = sink();
  if (!c) return;
  if (op === 'A') c.r2ClassA += n;
  else if (op === 'B') c.r2ClassB += n;
  else c.r2Free += n;
}

/** An R2 bucket whose operations count into `sink()` by their billing class. */
function meterR2(bucket: R2Bucket, sink: CountsSink): R2Bucket {
  // Methods are called on the real bucket (a native object: `this` must be it).
  const b = bucket as unknown as Record<string, (...a: unknown[]) => unknown>;
  const counted =
    (name: string, op: Op) =>
    (...a: unknown[]) => {
      countR2(sink, op);
      return b[name](...a);
    };
  const metered: Record<string, unknown> = {
    head: counted('head', 'B'),
    get: counted('get', 'B'),
    put: counted('put', 'A'),
    list: counted('list', 'A'),
    delete: (keys: string | string[]) => {
      countR2(sink, 'free', Array.isArray(keys) ? keys.length : 1);
      return bucket.delete(keys);
    },
    createMultipartUpload: async (...a: unknown[]) => {
      countR2(sink, 'A');
      return meterUpload((await b.createMultipartUpload(...a)) as R2MultipartUpload, sink);
    },
    // Resuming is local (a handle to an upload R2 already has): nothing is sent until a part, complete or abort.
    resumeMultipartUpload: (key: string, uploadId: string) => meterUpload(bucket.resumeMultipartUpload(key, uploadId), sink),
  };
  return metered as unknown as R2Bucket;
}

function meterUpload(u: R2MultipartUpload, sink: CountsSink): R2MultipartUpload {
  return {
    get key() {
      return u.key;
    },
    get uploadId() {
      return u.uploadId;
    },
    uploadPart(...a: Parameters<R2MultipartUpload['uploadPart']>) {
      countR2(sink, 'A');
      return u.uploadPart(...a);
    },
    complete(parts: R2UploadedPart[]) {
      countR2(sink, 'A');
      return u.complete(parts);
    },
    abort() {
      countR2(sink, 'free');
      return u.abort();
    },
  };
}
