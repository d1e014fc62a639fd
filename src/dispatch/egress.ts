/**
 * What a job's egress proxy tells the edge (docs/network.md), applied — only from the agent the
 * job runs on; anything about another agent's job, or a job this team does not have, changes
 * nothing and costs its sender's message budget (the caller charges it).
 *
 * - `egress.ask`: a connection to a host the grant does not list waits while a person decides.
 *   The ask becomes an admin approval of the team's (approvals.ts, the rules in src/approval/egress.ts:
 *   the dashboard's Approvals list, `gatehouse approvals approve`), kept here in `egress_asks` so a
 *   restarted object still answers it; an admin's decision answers it at once (`approvalDecided`),
 *   the alarm answers it with a denial when EGRESS_ASK_WAIT_MS ran out.
 * - `egress.log`: finished connections, numbered per job and kept in `egress_connections` — the
 *   job's network record that job_status, the admin API and the audit page read; at most
 *   EGRESS_CONNECTIONS_MAX per job, the rest only counted. Rows go EGRESS_LOG_RETENTION_MS after
 *   they arrived (the alarm), or with their job.
 */
import { JOB_RETENTION_MS } from '../contracts/job-view.ts';
import type { EgressAnswer, EgressAsk, EgressConnectionView, EgressLog, JobNetworkView } from '../contracts/network.ts';
import { EGRESS_ASK_WAIT_MS, EGRESS_CONNECTIONS_MAX } from '../contracts/network.ts';
import { egressApproval, egressVerdict, EGRESS_APPROVAL_TOOL } from '../approval/egress.ts';
import type { ApprovalRow } from '../approval/record.ts';
import type { AgentLink } from './agent-link.ts';
import type { Approvals } from './approvals.ts';
import { importEgress } from './egress-import.ts';
import { migrate, type DispatchHost, type Migration, type Wakes } from './capability-host.ts';
import type { JobRecords } from './job-records.ts';
import type { JobRows } from './job-rows.ts';

/** Asks of one job waiting at once; more are refused at once (each opens an approval a person must read). */
const EGRESS_ASKS_PENDING_MAX = 8;
/** Asks of one job in all. */
const EGRESS_ASKS_MAX = 64;
/** How long a connection row is kept after it arrived: as long as its job is. */
export const EGRESS_LOG_RETENTION_MS = JOB_RETENTION_MS;

/** How a message was taken: applied, about a job not the sender's (a stranger), or about the sender's own job that ended. */
export type EgressVerdict = 'ok' | 'stranger' | 'late';

const MIGRATIONS: readonly Migration[] = [
  {
    id: '1-egress',
    sql: [
      `CREATE TABLE IF NOT EXISTS egress_asks (job_id TEXT NOT NULL, ask_id TEXT NOT NULL, agent TEXT NOT NULL, approval_id TEXT,
    host TEXT NOT NULL, port INTEGER NOT NULL, method TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    decision TEXT, decided_by TEXT, PRIMARY KEY (job_id, ask_id))`,
      `CREATE INDEX IF NOT EXISTS egress_asks_pending ON egress_asks (expires_at) WHERE decision IS NULL`,
      `CREATE TABLE IF NOT EXISTS egress_counts (job_id TEXT PRIMARY KEY, listed INTEGER NOT NULL, dropped INTEGER NOT NULL, asks INTEGER NOT NULL,
    synced INTEGER NOT NULL DEFAULT 1)`,
      `CREATE TABLE IF NOT EXISTS egress_outbox (job_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (job_id, seq))`,
    ],
  },
  {
    // The connection log is kept here instead of copied to D1: rows still waiting in the outbox move in.
    id: '2-egress-log',
    sql: [
      `CREATE TABLE egress_connections (job_id TEXT NOT NULL, seq INTEGER NOT NULL, host TEXT NOT NULL, port INTEGER NOT NULL, address TEXT, method TEXT,
    decision TEXT NOT NULL, reason TEXT NOT NULL, bytes_up INTEGER NOT NULL, bytes_down INTEGER NOT NULL, started_at INTEGER NOT NULL, ms INTEGER NOT NULL,
    logged_at INTEGER NOT NULL, PRIMARY KEY (job_id, seq))`,
      `CREATE INDEX egress_connections_started ON egress_connections (started_at)`,
      `CREATE INDEX egress_connections_logged ON egress_connections (logged_at)`,
      `INSERT OR IGNORE INTO egress_connections (job_id, seq, host, port, address, method, decision, reason, bytes_up, bytes_down, started_at, ms, logged_at)
    SELECT job_id, seq, json_extract(data, '$.host'), json_extract(data, '$.port'), json_extract(data, '$.address'), json_extract(data, '$.method'),
      json_extract(data, '$.decision'), json_extract(data, '$.reason'), json_extract(data, '$.bytesUp'), json_extract(data, '$.bytesDown'),
      json_extract(data, '$.startedAt'), json_extract(data, '$.ms'), json_extract(data, '$.startedAt') FROM egress_outbox`,
      `DROP TABLE egress_outbox`,
      `ALTER TABLE egress_counts DROP COLUMN synced`,
    ],
  },
  {
    // The agent names the team secrets its proxy added (never their values); the audit shows which credential a connection used.
    id: '3-egress-credential',
    sql: [`ALTER TABLE egress_connections ADD COLUMN credential TEXT`],
  },
];

interface AskRow {
  job_id: string;
  ask_id: string;
  agent: string;
  approval_id: string | null;
  host: string;
  port: number;
  method: string | null;
  expires_at: number;
  decision: 'allow' | 'deny' | null;
  decided_by: string | null;
}

interface ConnectionRow {
  job_id: string;
  host: string;
  port: number;
  address: string | null;
  method: string | null;
  decision: 'allowed' | 'refused';
  reason: string;
  bytes_up: number;
  bytes_down: number;
  credential: string | null;
  started_at: number;
  ms: number;
}

const CONNECTION_COLUMNS = 'job_id, host, port, address, method, decision, reason, bytes_up, bytes_down, credential, started_at, ms';

const view = (r: ConnectionRow): EgressConnectionView => ({
  job_id: r.job_id,
  host: r.host,
  port: r.port,
  address: r.address,
  method: r.method,
  decision: r.decision,
  reason: r.reason,
  bytes_up: r.bytes_up,
  bytes_down: r.bytes_down,
  credential: r.credential,
  started_at: new Date(r.started_at).toISOString(),
  ms: r.ms,
});

type Host = Pick<DispatchHost, 'sql' | 'transactionSync' | 'wake'>;

export class Egress implements Wakes {
  private readonly host: Host;
  private readonly store: Pick<JobRows, 'get'> & Pick<JobRecords, 'spec'>;
  private readonly link: Pick<AgentLink, 'socketOf' | 'send'>;
  private readonly approvals: Pick<Approvals, 'open' | 'get' | 'update'>;
  /** `nextWake`'s answer, read once and again after this capability writes its asks or connections (undefined: read it). */
  private soonest: number | null | undefined;

  constructor(
    host: Host,
    parts: {
      store: Pick<JobRows, 'get'> & Pick<JobRecords, 'spec'>;
      link: Pick<AgentLink, 'socketOf' | 'send'>;
      approvals: Pick<Approvals, 'open' | 'get' | 'update'>;
    },
  ) {
    this.host = host;
    this.store = parts.store;
    this.link = parts.link;
    this.approvals = parts.approvals;
    migrate(host, 'egress', MIGRATIONS);
  }

  private get sql(): SqlStorage {
    return this.host.sql;
  }

  /** Which of the sender's jobs this is: a running one, an ended one, or none of its own. */
  private own(agentId: string, jobId: string): 'running' | 'ended' | null {
    const row = this.store.get(jobId);
    if (!row || row.agent !== agentId) return null;
    return row.state === 'running' ? 'running' : 'ended';
  }

  /** A connection of `agentId`'s running job waits for a person: answered now when the policy already says no. */
  async ask(agentId: string, m: EgressAsk, now: number): Promise<EgressVerdict> {
    const own = this.own(agentId, m.jobId);
    if (own !== 'running') return own === null ? 'stranger' : 'late';
    const known = this.askRow(m.jobId, m.askId);
    if (known) {
      // The same ask again (the agent lost the answer): answered again if decided, else still waiting.
      if (known.decision) this.answer(known, known.decision, known.decided_by ?? '');
      return 'ok';
    }
    const spec = this.store.spec(m.jobId);
    const grant = spec?.network;
    const reply = (decision: EgressAnswer['decision'], by: string) =>
      this.sendAnswer(agentId, { type: 'egress.answer', jobId: m.jobId, askId: m.askId, decision, by });
    if (grant?.mode !== 'allowlist' || grant.unlisted !== 'ask') {
      const key = grant?.source ?? 'network';
      reply('deny', grant?.mode === 'allowlist' ? `policy: ${key}.unlisted is "deny"` : `policy: ${key}.mode is "${grant?.mode ?? 'off'}"`);
      return 'ok';
    }
    const counts = this.counts(m.jobId);
    const pending = this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM egress_asks WHERE job_id = ? AND decision IS NULL`, m.jobId).one().n;
    if (pending >= EGRESS_ASKS_PENDING_MAX || counts.asks >= EGRESS_ASKS_MAX) {
      reply('deny', `too many asks: at most ${EGRESS_ASKS_PENDING_MAX} waiting and ${EGRESS_ASKS_MAX} in all per job`);
      return 'ok';
    }
    // Recorded before the approval's hash is computed (an await, during which other messages are handled), so the same ask again finds it.
    this.soonest = undefined;
    this.host.transactionSync(() => {
      this.sql.exec(
        `INSERT INTO egress_asks (job_id, ask_id, agent, approval_id, host, port, method, created_at, expires_at) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?)`,
        m.jobId,
        m.askId,
        agentId,
        m.host,
        m.port,
        m.method ?? null,
        now,
        now + EGRESS_ASK_WAIT_MS,
      );
      this.sql.exec(`UPDATE egress_counts SET asks = asks + 1 WHERE job_id = ?`, m.jobId);
    });
    const row = this.store.get(m.jobId);
    const o = await egressApproval(
      {
        subject: row?.subject ?? '',
        tokenId: row?.token_id ?? '',
        jobId: m.jobId,
        host: m.host,
        port: m.port,
        method: m.method,
        command: spec ? [spec.command, ...spec.args].join(' ') : '',
        source: grant.source,
      },
      now,
    );
    const { row: approval } = this.approvals.open(o);
    this.sql.exec(`UPDATE egress_asks SET approval_id = ? WHERE job_id = ? AND ask_id = ?`, approval.id, m.jobId, m.askId);
    // A reused approval may have been decided meanwhile.
    this.settle(now);
    await this.host.wake();
    return 'ok';
  }

  /** Finished connections of `agentId`'s job, stored (up to the per-job cap). */
  log(agentId: string, m: EgressLog, now: number): EgressVerdict {
    const own = this.own(agentId, m.jobId);
    if (own === null) return 'stranger';
    const c = this.counts(m.jobId);
    const room = Math.max(0, EGRESS_CONNECTIONS_MAX - c.listed);
    const take = m.connections.slice(0, room);
    // The agent reports what it did not list once, as a total; what is over the cap here is added.
    const dropped = Math.max(c.dropped, m.dropped ?? 0) + (m.connections.length - take.length);
    this.soonest = undefined;
    this.host.transactionSync(() => {
      take.forEach((x, i) => {
        const started = Date.parse(x.startedAt);
        this.sql.exec(
          `INSERT OR IGNORE INTO egress_connections (job_id, seq, host, port, address, method, decision, reason, bytes_up, bytes_down, credential, started_at, ms, logged_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          m.jobId,
          c.listed + i + 1,
          x.host,
          x.port,
          x.address ?? null,
          x.method ?? null,
          x.decision,
          x.reason,
          x.bytesUp,
          x.bytesDown,
          x.credential ?? null,
          Number.isFinite(started) ? started : now,
          x.ms,
          now,
        );
      });
      this.sql.exec(`UPDATE egress_counts SET listed = ?, dropped = ? WHERE job_id = ?`, c.listed + take.length, dropped, m.jobId);
    });
    // Past the cap it changed no row: like any late message it costs the sender.
    return take.length === 0 && m.connections.length > 0 ? 'late' : 'ok';
  }

  /** A job's grant (from its spec) and connections; null when the job has neither a grant nor connections on record. */
  jobNetwork(jobId: string): JobNetworkView | null {
    const grant = this.store.spec(jobId)?.network;
    const c = this.sql.exec<{ dropped: number }>(`SELECT dropped FROM egress_counts WHERE job_id = ?`, jobId).toArray()[0];
    const list = this.sql
      .exec<ConnectionRow & Record<string, SqlStorageValue>>(
        `SELECT ${CONNECTION_COLUMNS} FROM egress_connections WHERE job_id = ? ORDER BY seq LIMIT ?`,
        jobId,
        EGRESS_CONNECTIONS_MAX,
      )
      .toArray()
      .map(view);
    if (!grant?.mode && !c && list.length === 0) return null;
    return {
      mode: grant?.mode ?? null,
      source: grant?.source ?? null,
      connections: list,
      allowed: list.filter((r) => r.decision === 'allowed').length,
      refused: list.filter((r) => r.decision === 'refused').length,
      dropped: c?.dropped ?? 0,
      bytes_up: list.reduce((n, r) => n + r.bytes_up, 0),
      bytes_down: list.reduce((n, r) => n + r.bytes_down, 0),
    };
  }

  /** The team's latest connections, newest first (the audit page), optionally only refused ones or those started before `before` (epoch ms). */
  connections(f: { limit: number; refusedOnly?: boolean; before?: number }): EgressConnectionView[] {
    const where: string[] = [];
    const params: SqlStorageValue[] = [];
    if (f.refusedOnly) where.push(`decision = 'refused'`);
    if (f.before !== undefined) {
      where.push('started_at < ?');
      params.push(f.before);
    }
    return this.sql
      .exec<ConnectionRow & Record<string, SqlStorageValue>>(
        `SELECT ${CONNECTION_COLUMNS} FROM egress_connections ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY started_at DESC, rowid DESC LIMIT ?`,
        ...params,
        Math.min(Math.max(1, f.limit), EGRESS_CONNECTIONS_MAX),
      )
      .toArray()
      .map(view);
  }

  /** Bytes up and down of the logged connections that started in [from, to) (the team's usage: quotas.ts). */
  bytesBetween(from: number, to: number): number {
    return this.sql
      .exec<{ n: number }>(`SELECT COALESCE(SUM(bytes_up + bytes_down), 0) AS n FROM egress_connections WHERE started_at >= ? AND started_at < ?`, from, to)
      .one().n;
  }

  /** An admin decided an approval: the asks waiting on it are answered now. */
  approvalDecided(row: Pick<ApprovalRow, 'tool'>, now: number): void {
    if (row.tool === EGRESS_APPROVAL_TOOL) this.settle(now);
  }

  /** The alarm's part: answer the asks that ran out of time, and drop connection rows past their retention. */
  onAlarm(now: number): void {
    this.settle(now);
    this.sql.exec(`DELETE FROM egress_connections WHERE logged_at <= ?`, now - EGRESS_LOG_RETENTION_MS);
    this.soonest = undefined;
  }

  /** Answers each pending ask whose approval was decided, whose job ended, or whose time ran out. */
  private settle(now: number): void {
    const pending = this.sql.exec<AskRow & Record<string, SqlStorageValue>>(`SELECT * FROM egress_asks WHERE decision IS NULL`).toArray();
    for (const a of pending) {
      if (this.own(a.agent, a.job_id) !== 'running') {
        this.decide(a.job_id, a.ask_id, 'deny', 'the job ended');
        continue;
      }
      const v = egressVerdict(a.approval_id ? this.approvals.get(a.approval_id) : null, a.job_id, now);
      if (v?.decision === 'allow' && v.used) this.approvals.update(v.used);
      if (v) this.answer(a, v.decision, v.by);
      else if (now >= a.expires_at)
        this.answer(a, 'deny', `expired: no decision within ${Math.round(EGRESS_ASK_WAIT_MS / 1000)} s${a.approval_id ? ` (approval ${a.approval_id})` : ''}`);
    }
  }

  /** Records the decision and tells the job's agent (if it is connected: its proxy waits for it). */
  private answer(a: Pick<AskRow, 'job_id' | 'ask_id' | 'agent'>, decision: 'allow' | 'deny', by: string): void {
    this.decide(a.job_id, a.ask_id, decision, by);
    this.sendAnswer(a.agent, { type: 'egress.answer', jobId: a.job_id, askId: a.ask_id, decision, by: by.slice(0, 200) });
  }

  private decide(jobId: string, askId: string, decision: 'allow' | 'deny', by: string): void {
    this.soonest = undefined;
    this.sql.exec(`UPDATE egress_asks SET decision = ?, decided_by = ? WHERE job_id = ? AND ask_id = ?`, decision, by, jobId, askId);
  }

  private sendAnswer(agentId: string, m: EgressAnswer): void {
    const ws = this.link.socketOf(agentId);
    if (ws) this.link.send(ws, { ...m, by: m.by.slice(0, 200) });
  }

  private askRow(jobId: string, askId: string): AskRow | null {
    return (
      this.sql.exec<AskRow & Record<string, SqlStorageValue>>(`SELECT * FROM egress_asks WHERE job_id = ? AND ask_id = ?`, jobId, askId).toArray()[0] ?? null
    );
  }

  /** The job's counters, created at zero on first use. */
  private counts(jobId: string): { listed: number; dropped: number; asks: number } {
    this.sql.exec(`INSERT OR IGNORE INTO egress_counts (job_id, listed, dropped, asks) VALUES (?, 0, 0, 0)`, jobId);
    return this.sql.exec<{ listed: number; dropped: number; asks: number }>(`SELECT listed, dropped, asks FROM egress_counts WHERE job_id = ?`, jobId).one();
  }

  /** Pending asks need the alarm when the first runs out; connection rows, when the oldest is past its retention. */
  nextWake(_now: number): number | null {
    // One statement, and none again until this capability writes (the object asks this after every placement).
    if (this.soonest === undefined) {
      const w = this.sql
        .exec<{ ask: number | null; logged: number | null }>(
          `SELECT (SELECT MIN(expires_at) FROM egress_asks WHERE decision IS NULL) AS ask, (SELECT MIN(logged_at) FROM egress_connections) AS logged`,
        )
        .one();
      const at = Math.min(w.ask ?? Infinity, w.logged === null ? Infinity : w.logged + EGRESS_LOG_RETENTION_MS);
      this.soonest = at === Infinity ? null : at;
    }
    return this.soonest;
  }

  /** Jobs the store forgot: their asks, counts and connections go too. */
  forget(jobIds: readonly string[]): void {
    this.soonest = undefined;
    for (const id of jobIds) {
      this.sql.exec(`DELETE FROM egress_asks WHERE job_id = ?`, id);
      this.sql.exec(`DELETE FROM egress_counts WHERE job_id = ?`, id);
      this.sql.exec(`DELETE FROM egress_connections WHERE job_id = ?`, id);
    }
  }

  /** Old rows (D1's `egress_connections` and `egress_jobs`) taken in (egress-import.ts). */
  import(x: { connections?: readonly unknown[]; jobs?: readonly unknown[] }): { inserted: number; refused: number } {
    this.soonest = undefined;
    return importEgress(this.host, x);
  }
}
