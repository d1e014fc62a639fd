/**
 * The storage meter (src/platform/storage-meter.ts) is a unit test of counting: the D1 database and
 * the R2 bucket here are fakes that answer with the meta a real D1 gives (`rows_read`,
 * `rows_written`) and record what reaches them; nothing is stored. The call lines that carry the
 * counts from a real gateway are read in test/e2e/observability.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { meteredBindings, storageCounts, type StorageCounts } from '../../src/platform/storage-meter.ts';
import { closeCall, meterStorage, openCall, type CallLine } from '../../src/edge/call-log.ts';
import type { AppEnv, Env } from '../../src/env.ts';
import type { Principal } from '../../src/auth/principal.ts';

/** A D1 stand-in: every statement reads `read` rows and writes `written` rows, and answers `rows`. */
function fakeD1(o: { read?: number; written?: number; rows?: Record<string, unknown>[] } = {}) {
  const sent: { query: string; params: unknown[] }[] = [];
  const meta = () => ({ rows_read: o.read ?? 1, rows_written: o.written ?? 0 });
  const statement = (query: string, params: unknown[] = []) => {
    const s = {
      query,
      params,
      bind: (...v: unknown[]) => statement(query, v),
      all: async () => (sent.push({ query, params }), { success: true, results: o.rows ?? [], meta: meta() }),
      run: async () => (sent.push({ query, params }), { success: true, results: [], meta: meta() }),
      first: async () => {
        throw new Error('the meter answers first() from all(), which has the meta');
      },
      raw: async () => (sent.push({ query, params }), (o.rows ?? []).map((r) => Object.values(r))),
    };
    return s;
  };
  const db = {
    sent,
    prepare: (q: string) => statement(q),
    batch: async (ss: ReturnType<typeof statement>[]) => {
      // The real binding takes only its own statements: the meter must hand back the originals.
      for (const s of ss) if (!('query' in s)) throw new Error('not a D1 statement');
      return ss.map((s) => (sent.push({ query: s.query, params: s.params }), { success: true, results: [], meta: meta() }));
    },
    exec: async (q: string) => (sent.push({ query: q, params: [] }), { count: q.split(';').filter((x) => x.trim()).length, duration: 1 }),
  };
  return db;
}

/** An R2 stand-in recording each operation by name. */
function fakeR2() {
  const ops: string[] = [];
  const upload = (key: string) => ({
    key,
    uploadId: 'u1',
    uploadPart: async (n: number) => (ops.push('uploadPart'), { partNumber: n, etag: `e${n}` }),
    complete: async () => (ops.push('complete'), { key }),
    abort: async () => void ops.push('abort'),
  });
  return {
    ops,
    head: async () => (ops.push('head'), null),
    get: async () => (ops.push('get'), null),
    put: async (key: string) => (ops.push('put'), { key }),
    list: async () => (ops.push('list'), { objects: [], truncated: false }),
    delete: async () => void ops.push('delete'),
    createMultipartUpload: async (key: string) => (ops.push('create'), upload(key)),
    resumeMultipartUpload: (key: string) => upload(key),
  };
}

function envOf(db = fakeD1(), r2 = fakeR2()) {
  return { DB: db as unknown as D1Database, ARTIFACTS: r2 as unknown as R2Bucket, OTHER: 'kept' };
}

describe('storage meter: D1', () => {
  it('counts each statement and the rows its meta reports, through first, all, run and raw', async () => {
    const c = storageCounts();
    const env = meteredBindings(envOf(fakeD1({ read: 3, written: 2, rows: [{ n: 7 }] })), () => c);
    expect(await env.DB.prepare('SELECT n FROM t WHERE id = ?').bind(1).first('n')).toBe(7);
    expect(await env.DB.prepare('SELECT n FROM t').first()).toEqual({ n: 7 });
    await env.DB.prepare('UPDATE t SET n = 1').run();
    await env.DB.prepare('SELECT * FROM t').all();
    await env.DB.prepare('SELECT * FROM t').raw();
    // raw() answers without meta: the query is counted, its rows are not.
    expect(c).toMatchObject({ d1Queries: 5, d1RowsRead: 12, d1RowsWritten: 8 });
  });

  it('first() of a column the row lacks fails the way D1 does; no row is null', async () => {
    const env = meteredBindings(envOf(fakeD1({ rows: [{ n: 7 }] })), () => storageCounts());
    await expect(env.DB.prepare('SELECT n FROM t').first('m')).rejects.toThrow(/D1_COLUMN_NOTFOUND/);
    const empty = meteredBindings(envOf(fakeD1({ rows: [] })), () => storageCounts());
    expect(await empty.DB.prepare('SELECT n FROM t').first('n')).toBeNull();
  });

  it('a batch counts every statement and hands D1 its own statements', async () => {
    const c = storageCounts();
    const db = fakeD1({ read: 0, written: 1 });
    const env = meteredBindings(envOf(db), () => c);
    const ins = env.DB.prepare('INSERT INTO t VALUES (?)');
    await env.DB.batch([ins.bind(1), ins.bind(2), ins.bind(3)]);
    expect(db.sent.map((s) => s.params)).toEqual([[1], [2], [3]]);
    expect(c).toMatchObject({ d1Queries: 3, d1RowsWritten: 3 });
    await env.DB.exec('DELETE FROM a; DELETE FROM b');
    expect(c.d1Queries).toBe(5);
  });
});

describe('storage meter: R2', () => {
  it('counts put, list, multipart create, part and complete as Class A; get and head as Class B; delete and abort as free', async () => {
    const c = storageCounts();
    const r2 = fakeR2();
    const env = meteredBindings(envOf(fakeD1(), r2), () => c);
    await env.ARTIFACTS.put('k', 'v');
    await env.ARTIFACTS.list();
    await env.ARTIFACTS.get('k');
    await env.ARTIFACTS.head('k');
    const up = await env.ARTIFACTS.createMultipartUpload('big');
    const part = await up.uploadPart(1, 'x');
    await up.complete([part]);
    const resumed = env.ARTIFACTS.resumeMultipartUpload('big', 'u1'); // sends nothing
    expect(resumed.key).toBe('big');
    await resumed.uploadPart(2, 'y');
    await resumed.abort();
    await env.ARTIFACTS.delete(['a', 'b']);
    expect(r2.ops).toEqual(['put', 'list', 'get', 'head', 'create', 'uploadPart', 'complete', 'uploadPart', 'abort', 'delete']);
    expect(c).toMatchObject({ r2ClassA: 6, r2ClassB: 2, r2Free: 3 });
  });
});

describe('storage meter: the env view', () => {
  it('is one view per env (caches keyed by env keep working), leaves other bindings alone and wraps nothing twice', () => {
    const sink = () => undefined;
    const base = envOf();
    const v = meteredBindings(base, sink);
    expect(meteredBindings(base, sink)).toBe(v);
    expect(meteredBindings(v, sink)).toBe(v);
    expect(v.OTHER).toBe('kept');
    expect(v.DB).toBe(v.DB);
    expect({ ...v }.OTHER).toBe('kept');
  });

  it('counts nothing while the sink has no counts (outside a metered request)', async () => {
    let c: StorageCounts | undefined;
    const env = meteredBindings(envOf(), () => c);
    await env.DB.prepare('SELECT 1').all();
    c = storageCounts();
    await env.DB.prepare('SELECT 1').all();
    expect(c.d1Queries).toBe(1);
  });
});

describe('call lines carry their request’s storage work', () => {
  const principal: Principal = { team: 'acme', subject: 'ci', scopes: ['execute'], tokenId: 'j1', issuer: 'https://gw' };

  it('each request counts its own; in a batch each line takes what was counted since the previous one', async () => {
    const lines: CallLine[] = [];
    const info = console.info;
    console.info = (l: CallLine) => void lines.push(l);
    try {
      const app = new Hono<AppEnv>();
      app.use('*', meterStorage());
      app.post('/calls/:n', async (c) => {
        for (let i = 0; i < Number(c.req.param('n')); i++) {
          const key = {};
          openCall(key, { surface: 'mcp', tool: 'execute', principal });
          await c.env.DB.prepare('INSERT INTO jobs VALUES (?)').bind(i).run();
          await c.env.ARTIFACTS.put(`k${i}`, 'x');
          closeCall(c.env, key, 'ok');
        }
        return c.text('ok');
      });
      const env = envOf(fakeD1({ read: 0, written: 2 })) as unknown as Env;
      await Promise.all([app.request('/calls/1', { method: 'POST' }, env), app.request('/calls/2', { method: 'POST' }, env)]);
      expect(lines).toHaveLength(3);
      for (const l of lines) expect(l).toMatchObject({ d1Queries: 1, d1RowsRead: 0, d1RowsWritten: 2, r2ClassA: 1, r2ClassB: 0 });
    } finally {
      console.info = info;
    }
  });
});
