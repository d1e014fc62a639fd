/**
 * In-memory stand-ins for the D1 and R2 bindings, enough of their API for the artifact store:
 * D1 over node:sqlite with the repo's migrations applied, R2 as a Map that consumes streams
 * like the real one; and the team objects' artifact index (the real capability over node:sqlite,
 * behind the RPC methods the edge calls). The real bindings are exercised by test/e2e (wrangler dev).
 */
import { DatabaseSync } from 'node:sqlite';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Env } from '../../src/env.ts';
import type { StreamName } from '../../src/contracts/agent-protocol.ts';
import { ArtifactIndex, type StoredArtifact } from '../../src/dispatch/artifact-index.ts';
import { dispatchHost } from '../dispatch/sql-host.ts';

const MIGRATIONS = resolve(import.meta.dirname, '../../migrations');

class Stmt {
  private readonly db: DatabaseSync;
  readonly sql: string;
  readonly params: unknown[];
  constructor(db: DatabaseSync, sql: string, params: unknown[] = []) {
    this.db = db;
    this.sql = sql;
    this.params = params;
  }
  bind(...params: unknown[]) {
    return new Stmt(this.db, this.sql, params);
  }
  async all<T>() {
    const results = this.db.prepare(this.sql).all(...(this.params as never[])) as T[];
    return { results, success: true, meta: {} };
  }
  async first<T>() {
    return ((await this.all<T>()).results[0] ?? null) as T | null;
  }
  async run() {
    const r = this.db.prepare(this.sql).run(...(this.params as never[]));
    return { results: [], success: true, meta: { changes: Number(r.changes) } };
  }
}

export class FakeD1 {
  readonly db = new DatabaseSync(':memory:');
  failNext: string | null = null;
  constructor() {
    for (const f of readdirSync(MIGRATIONS)
      .filter((f) => f.endsWith('.sql'))
      .sort())
      this.db.exec(readFileSync(join(MIGRATIONS, f), 'utf8'));
  }
  prepare(sql: string) {
    if (this.failNext && sql.includes(this.failNext)) {
      this.failNext = null;
      throw new Error('D1_ERROR: simulated failure');
    }
    return new Stmt(this.db, sql);
  }
  async batch(stmts: Stmt[]) {
    this.db.exec('BEGIN');
    try {
      const out = [];
      for (const s of stmts) out.push(await s.run());
      this.db.exec('COMMIT');
      return out;
    } catch (e) {
      this.db.exec('ROLLBACK');
      throw e;
    }
  }
  rows(sql = 'SELECT * FROM artifacts ORDER BY handle, stream'): Record<string, unknown>[] {
    return this.db.prepare(sql).all() as Record<string, unknown>[];
  }
}

async function bytesOf(v: ReadableStream<Uint8Array> | string | Uint8Array): Promise<Uint8Array> {
  if (typeof v === 'string') return new TextEncoder().encode(v);
  if (v instanceof Uint8Array) return v;
  return new Uint8Array(await new Response(v).arrayBuffer());
}

export class FakeR2 {
  readonly objects = new Map<string, { data: Uint8Array; customMetadata?: Record<string, string> }>();
  readonly calls: string[] = [];
  async put(key: string, v: ReadableStream<Uint8Array> | string | Uint8Array, o?: { customMetadata?: Record<string, string> }) {
    this.calls.push(`put ${key}`);
    const data = await bytesOf(v);
    this.objects.set(key, { data, customMetadata: o?.customMetadata });
    return { key, size: data.length };
  }
  async get(key: string, o?: { range?: { suffix?: number; offset?: number; length?: number } }) {
    this.calls.push(`get ${key}${o?.range ? ' ' + JSON.stringify(o.range) : ''}`);
    const obj = this.objects.get(key);
    if (!obj) return null;
    let data = obj.data;
    if (o?.range?.suffix !== undefined) data = data.subarray(Math.max(0, data.length - o.range.suffix));
    else if (o?.range?.offset !== undefined) data = data.subarray(o.range.offset, o.range.offset + (o.range.length ?? data.length));
    const body = new Response(data.slice()).body!;
    return { key, size: obj.data.length, body, text: async () => new TextDecoder().decode(data), arrayBuffer: async () => data.slice().buffer };
  }
  async delete(keys: string | string[]) {
    this.calls.push(`delete ${Array.isArray(keys) ? keys.length : 1}`);
    for (const k of Array.isArray(keys) ? keys : [keys]) this.objects.delete(k);
  }
}

/** The TEAM_DISPATCHER namespace as the artifact client sees it: one real ArtifactIndex per team, on one clock. */
export class FakeTeams {
  readonly clock = { now: 1_800_000_000_000 };
  readonly indexes = new Map<string, ArtifactIndex>();
  private readonly env: () => Env;
  constructor(env: () => Env) {
    this.env = env;
  }
  idFromName(name: string) {
    return name;
  }
  index(team: string): ArtifactIndex {
    let ix = this.indexes.get(team);
    if (!ix) {
      const host = dispatchHost({ env: this.env(), team });
      host.now = () => this.clock.now;
      ix = new ArtifactIndex(host, { get: () => null, list: () => ({ rows: [], next: null }), result: () => null });
      this.indexes.set(team, ix);
    }
    return ix;
  }
  get(team: string) {
    const ix = this.index(team);
    return {
      artifactRows: async (handle: string) => ix.rows(handle),
      recentArtifacts: async (limit: number) => ix.recent(limit),
      artifactBytes: async (handle: string, stream: StreamName, offset: number, length: number) => ix.read(handle, stream, offset, length),
      indexArtifact: async (a: StoredArtifact, body: Uint8Array | null) => ix.store(a, body),
      artifactUploaded: async (a: StoredArtifact, body: Uint8Array | null) => ix.store(a, body),
    };
  }
}

export function fakeEnv(): { env: Env; db: FakeD1; r2: FakeR2; teams: FakeTeams } {
  const db = new FakeD1();
  const r2 = new FakeR2();
  const teams: FakeTeams = new FakeTeams(() => env);
  const env = { DB: db, ARTIFACTS: r2, TEAM_DISPATCHER: teams } as unknown as Env;
  return { env, db, r2, teams };
}

export const bodyOf = (s: string | Uint8Array) => new Response(s).body!;
