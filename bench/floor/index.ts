/**
 * The emulator floor (bench/emulator-floor.ts): one route per binding operation the gateway's
 * hot path makes, with nothing of Gatehouse around it, and `/op/path` doing all of an
 * `execute` call's operations in the same order. Not deployed; bench only.
 */
import { DurableObject } from 'cloudflare:workers';

interface FloorEnv {
  DB: D1Database;
  RL_A: RateLimit;
  RL_B: RateLimit;
  FLOOR: DurableObjectNamespace<Floor>;
}

let schema: Promise<unknown> | null = null;
const ready = (db: D1Database) =>
  (schema ??= db.batch([
    db.prepare('CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, spec TEXT, state TEXT)'),
    db.prepare('CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT, note TEXT)'),
  ]));

export class Floor extends DurableObject<FloorEnv> {
  private waiting = new Map<string, () => void>();

  constructor(ctx: DurableObjectState, env: FloorEnv) {
    super(ctx, env);
    ctx.storage.sql.exec('CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, spec TEXT, state TEXT)');
  }

  async fetch(req: Request): Promise<Response> {
    // The simulated agent: a hibernating WebSocket, as the dispatcher accepts agents.
    const pair = new WebSocketPair();
    this.ctx.acceptWebSocket(pair[1]);
    pair[1].serializeAttachment({ agent: new URL(req.url).searchParams.get('agent') ?? 'a' });
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  ping(): number {
    return 1;
  }

  sql(id: string): number {
    this.ctx.storage.sql.exec('INSERT OR REPLACE INTO jobs (id, spec, state) VALUES (?, ?, ?)', id, '{}', 'queued');
    this.ctx.storage.sql.exec('UPDATE jobs SET state = ? WHERE id = ?', 'exited', id);
    return 1;
  }

  /** 50 point reads by primary key, as the dispatcher reads a job row: the price of one DO SQLite statement. */
  select50(id: string): number {
    let n = 0;
    for (let i = 0; i < 50; i++) n += this.ctx.storage.sql.exec('SELECT * FROM jobs WHERE id = ?', id).toArray().length;
    return n;
  }

  /** Sends `job.start` to the agent and resolves when its `job.exit` came back (one round trip). */
  private roundTrip(id: string): Promise<void> {
    const ws = this.ctx.getWebSockets()[0];
    if (!ws) throw new Error('no agent connected');
    const done = new Promise<void>((ok) => this.waiting.set(id, ok));
    ws.send(JSON.stringify({ type: 'job.start', spec: { jobId: id } }));
    return done;
  }

  async ws(id: string): Promise<number> {
    await this.roundTrip(id);
    return 1;
  }

  /** An execute call's DO part: record, send to the agent, take its exit, ack, answer as a stream, copy to D1 (rows created and completed). */
  path(id: string): ReadableStream<Uint8Array> {
    this.ctx.storage.sql.exec('INSERT INTO jobs (id, spec, state) VALUES (?, ?, ?)', id, '{"command":"true"}', 'queued');
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const w = writable.getWriter();
    const enc = new TextEncoder();
    void (async () => {
      await this.roundTrip(id);
      this.ctx.storage.sql.exec('UPDATE jobs SET state = ? WHERE id = ?', 'exited', id);
      this.ctx.getWebSockets()[0]?.send(JSON.stringify({ type: 'job.ack', jobId: id }));
      await w.write(enc.encode(JSON.stringify({ type: 'exit', jobId: id, exitCode: 0 }) + '\n'));
      await w.close();
      // The background copy: the job's and the audit's rows created and completed in one batch.
      this.ctx.waitUntil(
        this.env.DB.batch([
          this.env.DB.prepare('INSERT INTO jobs (id, spec, state) VALUES (?, ?, ?)').bind(id, '{}', 'queued'),
          this.env.DB.prepare('INSERT INTO audit (job, note) VALUES (?, ?)').bind(id, 'queued'),
          this.env.DB.prepare('UPDATE jobs SET state = ? WHERE id = ?').bind('exited', id),
          this.env.DB.prepare('UPDATE audit SET note = ? WHERE job = ?').bind('exit 0', id),
        ]),
      );
    })();
    return readable;
  }

  async webSocketMessage(_ws: WebSocket, raw: string | ArrayBuffer): Promise<void> {
    const m = JSON.parse(String(raw)) as { type: string; jobId: string };
    this.waiting.get(m.jobId)?.();
    this.waiting.delete(m.jobId);
  }
}

const stub = (env: FloorEnv) => env.FLOOR.get(env.FLOOR.idFromName('team'));

export default {
  async fetch(req: Request, env: FloorEnv): Promise<Response> {
    const url = new URL(req.url);
    const id = crypto.randomUUID();
    await ready(env.DB);
    switch (url.pathname) {
      case '/healthz':
        return new Response('ok');
      case '/connect':
        return stub(env).fetch(req);
      case '/op/d1-query':
        await env.DB.prepare('SELECT count(*) AS n FROM jobs WHERE id = ?').bind(id).first();
        return new Response('ok');
      case '/op/d1-batch':
        await env.DB.batch([
          env.DB.prepare('INSERT INTO jobs (id, spec, state) VALUES (?, ?, ?)').bind(id, '{}', 'queued'),
          env.DB.prepare('INSERT INTO audit (job, note) VALUES (?, ?)').bind(id, 'queued'),
        ]);
        return new Response('ok');
      case '/op/ratelimit':
        await env.RL_A.limit({ key: 'k' });
        return new Response('ok');
      case '/op/do-rpc':
        return new Response(String(await stub(env).ping()));
      case '/op/do-sql':
        return new Response(String(await stub(env).sql(id)));
      case '/op/do-sql-50':
        return new Response(String(await stub(env).select50(id)));
      case '/op/ws-roundtrip':
        return new Response(String(await stub(env).ws(id)));
      case '/op/path': {
        // The order of an `execute` call: revocation/policy query, two rate limits, DO submit+follow
        // (the job and audit rows go to D1 from the DO, in the background: see `path`).
        await env.DB.prepare('SELECT count(*) AS n FROM jobs WHERE id = ?').bind(id).first();
        await env.RL_A.limit({ key: 'token' });
        await env.RL_B.limit({ key: 'team' });
        const events = await stub(env).path(id);
        return new Response(await new Response(events).text());
      }
      default:
        return new Response('not found', { status: 404 });
    }
  },
};
