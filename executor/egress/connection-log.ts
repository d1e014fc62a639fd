/**
 * The records of one job's egress connections: each connection gets one record (EgressConnection)
 * when it opens, completed once when it ends, and sent to the edge in `egress.log` batches; past
 * the contract's EGRESS_CONNECTIONS_MAX only a count of the dropped ones is sent.
 */
import type { Duplex } from 'node:stream';
import { EGRESS_CONNECTIONS_MAX, type EgressConnection, type EgressLog } from '../../src/contracts/network.ts';
import type { Logger } from '../log.ts';
import { refusalText } from './refusal.ts';

/** Distinct refusals a job's result names (job_status lists every connection). */
const REFUSAL_NOTICES_MAX = 5;
/** Records sent per `egress.log` message (the contract's maximum). */
const LOG_BATCH = 50;

/** One connection through the proxy: its record and the sockets it holds. */
export interface Conn {
  rec: EgressConnection;
  t0: number;
  sockets: Set<Duplex>;
  done: boolean;
}

export class ConnectionLog {
  /** Connections not ended yet. */
  readonly open = new Set<Conn>();
  private readonly jobId: string;
  private readonly send: (m: EgressLog) => void;
  private readonly log: Logger | undefined;
  private pending: EgressConnection[] = [];
  private listed = 0;
  private dropped = 0;
  private settle: (() => void) | null = null;
  /** Distinct refusals, as the job's result says them (a retrying client repeats one many times). */
  private readonly notices = new Set<string>();

  constructor(o: { jobId: string; send: (m: EgressLog) => void; log?: Logger }) {
    this.jobId = o.jobId;
    this.send = o.send;
    this.log = o.log;
  }

  begin(host: string, port: number, method: string): Conn {
    const conn: Conn = {
      rec: {
        host: host.slice(0, 253),
        port,
        method: method.slice(0, 16),
        decision: 'allowed',
        reason: '',
        bytesUp: 0,
        bytesDown: 0,
        startedAt: new Date().toISOString(),
        ms: 0,
      },
      t0: performance.now(),
      sockets: new Set(),
      done: false,
    };
    this.open.add(conn);
    return conn;
  }

  refuse(conn: Conn, reason: string, policyKey?: string): void {
    const notice = refusalText(conn.rec.host, conn.rec.port, reason, policyKey).trim();
    if (this.notices.size < REFUSAL_NOTICES_MAX) this.notices.add(notice);
    conn.rec.decision = 'refused';
    this.finish(conn, reason);
    this.log?.info(`job ${this.jobId}: egress to ${conn.rec.host}:${conn.rec.port} refused: ${reason}`);
  }

  /** Writes the connection's record once (its end), with `why` added to the reason. */
  finish(conn: Conn, why: string | undefined): void {
    if (conn.done) return;
    conn.done = true;
    this.open.delete(conn);
    const r = conn.rec;
    if (why && !r.reason.endsWith(why)) r.reason = r.reason ? `${r.reason}; ${why}` : why;
    r.reason = r.reason.slice(0, 300);
    r.ms = Math.max(0, Math.round(performance.now() - conn.t0));
    if (this.listed >= EGRESS_CONNECTIONS_MAX) this.dropped++;
    else {
      this.listed++;
      this.pending.push(r);
      if (this.pending.length >= LOG_BATCH) this.flush(false);
    }
    if (!this.open.size) this.settle?.();
  }

  refusalNotices(): string[] {
    return [...this.notices];
  }

  /** Resolves once every open connection ended (their close handlers write their records), or after `ms`. */
  async allEnded(ms: number): Promise<void> {
    if (this.open.size) await Promise.race([new Promise<void>((r) => (this.settle = r)), new Promise((r) => setTimeout(r, ms))]);
  }

  /** Sends the records not sent yet; `last`: the job's final batch, which carries the dropped count. */
  flush(last: boolean): void {
    while (this.pending.length || (last && this.dropped)) {
      const connections = this.pending.splice(0, LOG_BATCH);
      const tail = last && !this.pending.length;
      this.send({ type: 'egress.log', jobId: this.jobId, connections, ...(tail && this.dropped ? { dropped: this.dropped } : {}) });
      if (tail) break;
    }
  }
}
