/**
 * What a job's egress proxy tells the edge (docs/network.md), applied — only from the agent the
 * job runs on; anything about another agent's job, or a job this team does not have, changes
 * nothing and costs its sender's message budget (the caller charges it).
 *
 * - `egress.ask`: a connection to a host the grant does not list waits while a person decides.
 *   The ask becomes an admin approval (src/approval/egress.ts: the dashboard's Approvals list,
 *   `gatehouse approvals approve`), kept here in `egress_asks` so a restarted object still answers
 *   it; the alarm reads the decisions from D1 every ASK_POLL_MS and sends `egress.answer` when one
 *   is decided, or a denial when EGRESS_ASK_WAIT_MS ran out.
 * - `egress.log`: finished connections, numbered per job and kept in `egress_outbox` until D1 took
 *   them (src/store/egress.ts); at most EGRESS_CONNECTIONS_MAX per job, the rest only counted.
 */
import type { EgressAnswer, EgressAsk, EgressLog } from '../contracts/network.ts';
import { EGRESS_ASK_WAIT_MS, EGRESS_CONNECTIONS_MAX } from '../contracts/network.ts';
import { approvalsByIds, openEgressApproval, useEgressApproval } from '../approval/egress.ts';
import { egressStatements, type EgressRow } from '../store/egress.ts';
import type { AgentLink } from './agent-link.ts';
import { migrate, type DispatchHost, type Migration, type Wakes } from './host.ts';
import type { JobStore } from './job-store.ts';

/** How often pending asks look for a decision in D1 (one query for all of them). */
const ASK_POLL_MS = 1000;
/** Asks of one job waiting at once; more are refused at once (each opens an approval a person must read). */
const EGRESS_ASKS_PENDING_MAX = 8;
/** Asks of one job in all. */
const EGRESS_ASKS_MAX = 64;
/** Connection rows one copy to D1 takes (one D1 batch). */
const FLUSH_ROWS = 100;

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
      // `synced` 0: D1's egress_jobs row has not been given these counts yet.
      `CREATE TABLE IF NOT EXISTS egress_counts (job_id TEXT PRIMARY KEY, listed INTEGER NOT NULL, dropped INTEGER NOT NULL, asks INTEGER NOT NULL,
    synced INTEGER NOT NULL DEFAULT 1)`,
      `CREATE TABLE IF NOT EXISTS egress_outbox (job_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (job_id, seq))`,
    ],
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

type Host = Pick<DispatchHost, 'sql' | 'transactionSync' | 'env' | 'now' | 'team' | 'wake' | 'heartbeatMs'>;

export class Egress implements Wakes {
  private readonly host: Host;
  private readonly store: Pick<JobStore, 'get' | 'spec'>;
  private readonly link: Pick<AgentLink, 'socketOf' | 'send'>;
  private flushing = false;
  private deciding = false;

  constructor(host: Host, parts: { store: Pick<JobStore, 'get' | 'spec'>; link: Pick<AgentLink, 'socketOf' | 'send'> }) {
    this.host = host;
    this.store = parts.store;
    this.link = parts.link;
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
    // Recorded before the approval is opened (a D1 call, during which other messages are handled), so the same ask again finds it.
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
    try {
      const approval = await openEgressApproval(
        this.host.env.DB,
        {
          team: await this.host.team(),
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
      this.sql.exec(`UPDATE egress_asks SET approval_id = ? WHERE job_id = ? AND ask_id = ?`, approval.id, m.jobId, m.askId);
    } catch (e) {
      console.error(`job ${m.jobId}: could not open an approval for ${m.host}:${m.port}: ${(e as Error).message}`);
      this.decide(m.jobId, m.askId, 'deny', 'the approval could not be opened (storage failed); try again');
    }
    await this.host.wake();
    return 'ok';
  }

  /** Finished connections of `agentId`'s job, stored (up to the per-job cap) and copied to D1. */
  async log(agentId: string, m: EgressLog, now: number): Promise<EgressVerdict> {
    const own = this.own(agentId, m.jobId);
    if (own === null) return 'stranger';
    const c = this.counts(m.jobId);
    const room = Math.max(0, EGRESS_CONNECTIONS_MAX - c.listed);
    const take = m.connections.slice(0, room);
    // The agent reports what it did not list once, as a total; what is over the cap here is added.
    const dropped = Math.max(c.dropped, m.dropped ?? 0) + (m.connections.length - take.length);
    this.host.transactionSync(() => {
      take.forEach((x, i) => {
        const started = Date.parse(x.startedAt);
        const row: EgressRow = {
          jobId: m.jobId,
          seq: c.listed + i + 1,
          host: x.host,
          port: x.port,
          address: x.address ?? null,
          method: x.method ?? null,
          decision: x.decision,
          reason: x.reason,
          bytesUp: x.bytesUp,
          bytesDown: x.bytesDown,
          startedAt: Number.isFinite(started) ? started : now,
          ms: x.ms,
        };
        this.sql.exec(`INSERT OR IGNORE INTO egress_outbox (job_id, seq, data) VALUES (?, ?, ?)`, m.jobId, row.seq, JSON.stringify(row));
      });
      this.sql.exec(`UPDATE egress_counts SET listed = ?, dropped = ?, synced = 0 WHERE job_id = ?`, c.listed + take.length, dropped, m.jobId);
    });
    await this.flush();
    // Past the cap it changed no row: like any late message it costs the sender.
    return take.length === 0 && m.connections.length > 0 ? 'late' : 'ok';
  }

  /** Copies stored connection rows to D1 (the alarm retries what D1 refused). */
  async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      for (;;) {
        const rows = this.sql
          .exec<{ data: string }>(`SELECT data FROM egress_outbox ORDER BY job_id, seq LIMIT ?`, FLUSH_ROWS)
          .toArray()
          .map((r) => JSON.parse(r.data) as EgressRow);
        const dirty = this.sql
          .exec<{ job_id: string; listed: number; dropped: number }>(`SELECT job_id, listed, dropped FROM egress_counts WHERE synced = 0 LIMIT ?`, FLUSH_ROWS)
          .toArray();
        if (rows.length === 0 && dirty.length === 0) return;
        const counts = new Map(dirty.map((d) => [d.job_id, { listed: d.listed, dropped: d.dropped }]));
        for (const r of rows) if (!counts.has(r.jobId)) counts.set(r.jobId, this.counts(r.jobId));
        await this.host.env.DB.batch(egressStatements(this.host.env.DB, await this.host.team(), rows, counts));
        this.host.transactionSync(() => {
          for (const r of rows) this.sql.exec(`DELETE FROM egress_outbox WHERE job_id = ? AND seq = ?`, r.jobId, r.seq);
          // Counts that changed meanwhile (a log handled during the D1 call) stay to be copied.
          for (const [id, c] of counts)
            this.sql.exec(`UPDATE egress_counts SET synced = 1 WHERE job_id = ? AND listed = ? AND dropped = ?`, id, c.listed, c.dropped);
        });
        if (rows.length < FLUSH_ROWS && dirty.length < FLUSH_ROWS) return;
      }
    } catch (e) {
      console.error(`egress connections not copied to D1: ${(e as Error).message}; retried at the next alarm`);
    } finally {
      this.flushing = false;
    }
  }

  /** The alarm's part: copy what D1 has not taken, and answer the asks that were decided or ran out of time. */
  async onAlarm(now: number): Promise<void> {
    await this.flush();
    await this.decideAsks(now);
  }

  private async decideAsks(now: number): Promise<void> {
    if (this.deciding) return;
    this.deciding = true;
    try {
      const pending = this.sql.exec<AskRow & Record<string, SqlStorageValue>>(`SELECT * FROM egress_asks WHERE decision IS NULL`).toArray();
      if (pending.length === 0) return;
      const team = await this.host.team();
      const db = this.host.env.DB;
      let approvals = new Map<string, Awaited<ReturnType<typeof approvalsByIds>>[number]>();
      try {
        const ids = [...new Set(pending.map((a) => a.approval_id).filter((x): x is string => x !== null))];
        approvals = new Map((await approvalsByIds(db, team, ids)).map((r) => [r.id, r]));
      } catch (e) {
        console.error(`could not read egress approvals: ${(e as Error).message}; asks past their time are refused`);
      }
      for (const a of pending) {
        if (this.own(a.agent, a.job_id) !== 'running') {
          this.decide(a.job_id, a.ask_id, 'deny', 'the job ended');
          continue;
        }
        const ap = a.approval_id ? approvals.get(a.approval_id) : undefined;
        if (ap?.status === 'approved' || (ap?.status === 'used' && ap.job_id === a.job_id)) {
          const by = `approval ${ap.id} (approved by ${ap.decided_by ?? 'an admin'})`;
          if (ap.status === 'used' || (await useEgressApproval(db, team, ap.id, a.job_id, now).catch(() => false))) {
            this.answer(a, 'allow', by);
            continue;
          }
        }
        if (ap?.status === 'denied') {
          this.answer(a, 'deny', `approval ${ap.id} (denied by ${ap.decided_by ?? 'an admin'}${ap.decision_note ? `: ${ap.decision_note}` : ''})`);
          continue;
        }
        if (now >= a.expires_at)
          this.answer(
            a,
            'deny',
            `expired: no decision within ${Math.round(EGRESS_ASK_WAIT_MS / 1000)} s${a.approval_id ? ` (approval ${a.approval_id})` : ''}`,
          );
      }
    } finally {
      this.deciding = false;
    }
  }

  /** Records the decision and tells the job's agent (if it is connected: its proxy waits for it). */
  private answer(a: Pick<AskRow, 'job_id' | 'ask_id' | 'agent'>, decision: 'allow' | 'deny', by: string): void {
    this.decide(a.job_id, a.ask_id, decision, by);
    this.sendAnswer(a.agent, { type: 'egress.answer', jobId: a.job_id, askId: a.ask_id, decision, by: by.slice(0, 200) });
  }

  private decide(jobId: string, askId: string, decision: 'allow' | 'deny', by: string): void {
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

  /** Pending asks need the alarm every ASK_POLL_MS; rows D1 has not taken, every heartbeat. */
  nextWake(now: number): number | null {
    // One statement: the object asks this after every placement.
    const w = this.sql
      .exec<{ ask: number; copy: number }>(
        `SELECT EXISTS (SELECT 1 FROM egress_asks WHERE decision IS NULL) AS ask,
          EXISTS (SELECT 1 FROM egress_outbox) OR EXISTS (SELECT 1 FROM egress_counts WHERE synced = 0) AS copy`,
      )
      .one();
    if (w.ask) return now + ASK_POLL_MS;
    return w.copy ? now + this.host.heartbeatMs : null;
  }

  /** Jobs the store forgot: their asks and counts go too (their rows are in D1). */
  forget(jobIds: readonly string[]): void {
    for (const id of jobIds) {
      this.sql.exec(`DELETE FROM egress_asks WHERE job_id = ?`, id);
      this.sql.exec(`DELETE FROM egress_counts WHERE job_id = ?`, id);
    }
  }
}
