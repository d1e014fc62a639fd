/**
 * Test hosts for the team DO's capabilities: node:sqlite standing in for `ctx.storage.sql` (with
 * `transactionSync`), sockets that record what is sent to them, and a clock the test moves.
 */
import { DatabaseSync } from 'node:sqlite';
import { timingSafeEqual } from 'node:crypto';
import type { DispatchHost, SqlHost } from '../../src/dispatch/capability-host.ts';
import type { Env } from '../../src/env.ts';
import type { AuditEntry } from '../../src/store/audit.ts';
import { SQLITE_BOUND_PARAMETERS_MAX } from '../../src/platform/limits.ts';

// workerd's extension of WebCrypto, which the upload grant check uses.
const subtle = crypto.subtle as unknown as { timingSafeEqual?: (a: Uint8Array, b: Uint8Array) => boolean };
subtle.timingSafeEqual ??= (a, b) => timingSafeEqual(a, b);

export function sqlHost(db = new DatabaseSync(':memory:')): SqlHost & { db: DatabaseSync } {
  const sql = {
    exec(q: string, ...params: unknown[]) {
      // node:sqlite takes far more; the DO refuses a statement over its limit.
      if (params.length > SQLITE_BOUND_PARAMETERS_MAX)
        throw new Error(`${params.length} bound parameters; a Durable Object's SQLite takes ${SQLITE_BOUND_PARAMETERS_MAX}`);
      const stmt = db.prepare(q);
      if (/^\s*SELECT/i.test(q)) {
        const rows = stmt.all(...(params as never[]));
        return { toArray: () => rows, one: () => rows[0], rowsWritten: 0 };
      }
      // A write that hands back what it wrote: its rows, one written per row returned.
      if (/\bRETURNING\b/i.test(q)) {
        const rows = stmt.all(...(params as never[]));
        return { toArray: () => rows, one: () => rows[0], rowsWritten: rows.length };
      }
      const r = stmt.run(...(params as never[]));
      return { toArray: () => [], one: () => undefined, rowsWritten: Number(r.changes) };
    },
  };
  return {
    db,
    sql: sql as unknown as SqlStorage,
    transactionSync<T>(f: () => T): T {
      db.exec('BEGIN');
      try {
        const v = f();
        db.exec('COMMIT');
        return v;
      } catch (e) {
        db.exec('ROLLBACK');
        throw e;
      }
    },
  };
}

/** A WebSocket as the hibernation API hands it to the DO: an attachment, and what was sent to it. */
export class FakeSocket {
  readyState: number = WebSocket.OPEN;
  readonly sent: Record<string, unknown>[] = [];
  closed: { code: number; reason: string } | null = null;
  /** When the platform last answered this socket's ping (AGENT_PING), as a test sets it. */
  lastPing: number | null = null;
  private attachment: unknown = null;
  serializeAttachment(v: unknown): void {
    this.attachment = structuredClone(v);
  }
  deserializeAttachment(): unknown {
    return structuredClone(this.attachment);
  }
  send(m: string): void {
    if (this.readyState !== WebSocket.OPEN) throw new Error('socket closed');
    this.sent.push(JSON.parse(m) as Record<string, unknown>);
  }
  close(code: number, reason: string): void {
    this.closed = { code, reason };
    this.readyState = WebSocket.CLOSED;
  }
  /** Messages sent of one type. */
  of(type: string): Record<string, unknown>[] {
    return this.sent.filter((m) => m.type === type);
  }
}

export type TestHost = DispatchHost & { db: DatabaseSync; clock: { now: number }; socketList: FakeSocket[]; wakeCalls: number; audits: AuditEntry[] };

/** A DispatchHost over node:sqlite with a clock the test sets, the sockets it adds, and a count of alarm moves asked for. */
export function dispatchHost(o: { env?: Partial<Env>; team?: string; heartbeatMs?: number; db?: DatabaseSync } = {}): TestHost {
  const base = sqlHost(o.db);
  const clock = { now: 1_000_000 };
  const socketList: FakeSocket[] = [];
  const host: TestHost = {
    ...base,
    clock,
    socketList,
    env: (o.env ?? {}) as Env,
    heartbeatMs: o.heartbeatMs ?? 1000,
    wakeCalls: 0,
    audits: [],
    audit: (e) => void host.audits.push(e),
    storageBytes: () => {
      const r = base.db.prepare('SELECT page_count * page_size AS n FROM pragma_page_count(), pragma_page_size()').get() as { n: number };
      return r.n;
    },
    now: () => clock.now,
    team: async () => o.team ?? 'acme',
    sockets: () => socketList as unknown as WebSocket[],
    lastPing: (ws) => (ws as unknown as FakeSocket).lastPing,
    wake: async () => {
      host.wakeCalls += 1;
    },
  };
  return host;
}
