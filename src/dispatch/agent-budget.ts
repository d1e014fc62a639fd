/**
 * What one agent connection may send. Every message of every agent of a team is handled in the
 * team's one Durable Object, one at a time: a socket that sends faster than the object answers
 * delays every call of the team (and, where objects share a machine, of other teams). So each
 * socket gets a budget, and a socket over it is closed (AGENT_BUDGET_CLOSE) and audited.
 *
 * - `hello`, `running`, protocol 2's `heartbeat` and a ping that reaches the object (none does
 *   while the platform answers pings): HEARTBEATS_PER_INTERVAL per heartbeat interval on average
 *   since the connection opened. The agent sends at most one `running` per interval
 *   (executor/connection.ts), at the interval the edge gave it in `welcome`; messages that queued up
 *   (behind a big result the object is still reading, or on a stalled link) arrive together, but
 *   never more than the time they waited allows. A new connection starts with HEARTBEAT_BURST only.
 * - Messages that change nothing at the edge, in two buckets. About a stranger — a job the edge
 *   does not know or that runs on another agent: a small burst
 *   (STRANGER_BURST units), each costing its size too, since it was parsed and looked up for
 *   nothing; a real agent sends them only when it held results longer than the edge keeps jobs.
 *   Late ones — about the agent's own job that has ended, or a report already taken — a large
 *   burst (LATE_BURST), one unit each: a reconnecting agent re-sends what the edge has not
 *   acknowledged, and the edge made those jobs, so their number is its own. The first message
 *   about such a job is answered once (`job.ack`: forget it) and the id remembered, so later ones
 *   are dropped without a storage read — often without parsing (`peekJobMessage`).
 * - Malformed messages (not JSON, JSON of no message's shape, a binary frame that is no output
 *   frame): their own, smallest bucket (MALFORMED_BURST units, each costing its size too). An agent
 *   of this protocol version never sends one (a hello of another version is refused first), so a
 *   socket that does is broken or forged, and it is closed after a handful of parses.
 * - `job.exit.part` of a running job: at most EXIT_PARTS_PER_JOB per job per connection.
 * - Live output frames of the agent's own jobs are not counted: the agent's relay paces them
 *   (executor/jobs/relay.ts) and the edge keeps at most LIVE_OUTPUT_MAX_BYTES of each stream.
 *
 * A pure capability: the DO keeps one per socket in memory and passes the clock. After an
 * eviction or restart a socket starts afresh, which grants one more burst at most; a socket
 * that keeps sending never lets its object hibernate. Going over is final: the socket is marked
 * refused in memory and in its attachment (agent-link.ts `refuse`), and the DO drops whatever it
 * still sends — already queued or after a hibernation — before any parsing, SQL, storage or log.
 */
import { EXIT_PARTS_MAX } from '../contracts/agent-protocol.ts';

/** Heartbeats (and the hello) a new connection may send back to back: a hello and a few heartbeats. */
export const HEARTBEAT_BURST = 4;
/** Sustained heartbeats per interval: the agent sends one; timer drift and jitter never double it. */
const HEARTBEATS_PER_INTERVAL = 2;
/**
 * How long an agent's heartbeats may have queued and still arrive together within budget: the
 * allowance a connection earns is kept this long. An object reading an agent's biggest result
 * (2 × EXIT_PARTS_MAX parts of up to 6 MiB each) takes seconds; minutes on a machine loaded
 * far beyond its cores. A socket idle this long may then send this many heartbeats at once.
 */
export const HEARTBEAT_BACKLOG_MS = 10 * 60_000;

/**
 * Units of messages about strangers a socket may send back to back. A real
 * agent sends them only for results it held longer than the edge keeps jobs (JOB_RETENTION_MS)
 * or after the edge lost its storage: each such job is acknowledged once, so a socket closed over
 * this burst reconnects and re-sends only what was not acknowledged yet. A flood is closed after
 * this many storage reads, or STRANGER_BURST × STRANGER_UNIT_BYTES of JSON parsed.
 */
export const STRANGER_BURST = 64;
/** Stranger units a socket earns back per second. */
export const STRANGER_UNITS_PER_SECOND = 4;
/** Bytes of a message about a stranger (or a malformed one) that cost one more unit: 1 MiB of parsing per burst. */
export const STRANGER_UNIT_BYTES = 16 * 1024;
/**
 * Late messages a socket may send back to back. A reconnecting agent re-sends each result the
 * edge has not acknowledged; for a result the edge already took (its ack was lost with the
 * socket) that is its exit (free: the first message about the job), for a big one up to
 * 2 × EXIT_PARTS_MAX late parts, and its upload reports: ~35 units, so ~29 big results at once
 * and any number of small ones.
 */
export const LATE_BURST = 1024;
/** Late units a socket earns back per second: one big result re-sent every second is far below it. */
export const LATE_UNITS_PER_SECOND = 64;
/** `job.exit.part` messages of one running job per connection: a result's parts are sent once per connection (both streams). */
export const EXIT_PARTS_PER_JOB = 2 * EXIT_PARTS_MAX;
/**
 * Units of malformed messages a socket may send: enough for one stray frame of a buggy agent,
 * few enough that a junk flood is closed after a handful of parses (the first one is logged, the
 * rest only counted). Each costs one unit plus one per MALFORMED_UNIT_BYTES, so one message of
 * MALFORMED_BURST × MALFORMED_UNIT_BYTES (512 KiB) of junk is refused at once, while a buggy agent's
 * few messages of the wrong shape (an egress log with an oversized field) are dropped, not answered
 * by a close and a reconnect loop.
 */
export const MALFORMED_BURST = 8;
/** Bytes of a malformed message that cost one more unit. */
export const MALFORMED_UNIT_BYTES = 64 * 1024;
/** Malformed units a socket earns back per minute: a buggy agent's rare stray frame, never a flood. */
export const MALFORMED_UNITS_PER_MINUTE = 1;
/** Job ids a socket remembers as answered; the oldest is forgotten first (it then costs one more lookup). */
const ANSWERED_IDS_MAX = 1024;

export type BudgetKind = 'heartbeats' | 'strangers' | 'malformed' | 'late' | 'parts';

export interface Overrun {
  kind: BudgetKind;
  /** What was over, for the close reason (≤ 123 bytes of ASCII) and the audit row. */
  message: string;
}

/** Why a job id was answered: a stranger (unknown, or another agent's) or one of this agent's own, ended. */
export type Answered = 'stranger' | 'ended';

/** A token bucket: `capacity` at most, `perMs` earned back per millisecond, `initial` to start with (default: full). */
class Bucket {
  private tokens: number;
  private at: number;
  private readonly capacity: number;
  private readonly perMs: number;

  constructor(capacity: number, perMs: number, now: number, initial = capacity) {
    this.capacity = capacity;
    this.perMs = perMs;
    this.tokens = initial;
    this.at = now;
  }

  take(n: number, now: number): boolean {
    this.tokens = Math.min(this.capacity, this.tokens + Math.max(0, now - this.at) * this.perMs);
    this.at = now;
    if (this.tokens < n) return false;
    this.tokens -= n;
    return true;
  }
}

export class AgentBudget {
  private readonly heartbeatMs: number;
  private readonly beats: Bucket;
  private readonly strangers: Bucket;
  private readonly lates: Bucket;
  private readonly malformedUnits: Bucket;
  private rejectedBefore = false;
  private readonly answered = new Map<string, Answered>();
  private readonly parts = new Map<string, number>();
  private readonly reports = new Set<string>();
  /** Set once the socket went over: whatever it still sends is dropped unread (the DO marks the socket refused). */
  over: Overrun | null = null;

  constructor(heartbeatMs: number, now: number) {
    this.heartbeatMs = heartbeatMs;
    const backlog = HEARTBEAT_BURST + Math.ceil((HEARTBEATS_PER_INTERVAL * HEARTBEAT_BACKLOG_MS) / heartbeatMs);
    this.beats = new Bucket(backlog, HEARTBEATS_PER_INTERVAL / heartbeatMs, now, HEARTBEAT_BURST);
    this.strangers = new Bucket(STRANGER_BURST, STRANGER_UNITS_PER_SECOND / 1000, now);
    this.lates = new Bucket(LATE_BURST, LATE_UNITS_PER_SECOND / 1000, now);
    this.malformedUnits = new Bucket(MALFORMED_BURST, MALFORMED_UNITS_PER_MINUTE / 60_000, now);
  }

  /** A `hello` or `heartbeat` arrived. */
  heartbeat(now: number): Overrun | null {
    if (this.beats.take(1, now)) return null;
    return this.overrun('heartbeats', `heartbeats more often than ${HEARTBEATS_PER_INTERVAL} per ${this.heartbeatMs} ms`);
  }

  /** A message about a stranger of `bytes` arrived: one unit, plus one per STRANGER_UNIT_BYTES (0 when dropped unparsed). */
  stranger(bytes: number, now: number): Overrun | null {
    if (this.strangers.take(1 + Math.floor(bytes / STRANGER_UNIT_BYTES), now)) return null;
    return this.overrun('strangers', `more than ${STRANGER_BURST} messages about jobs unknown or not its own`);
  }

  /** A malformed message of `bytes` arrived (not JSON, of no message's shape, or an undecodable frame). */
  malformed(bytes: number, now: number): Overrun | null {
    if (this.malformedUnits.take(1 + Math.floor(bytes / MALFORMED_UNIT_BYTES), now)) return null;
    return this.overrun('malformed', `more than ${MALFORMED_BURST} malformed messages`);
  }

  /** True the first time only: a socket's first rejected message is logged, the rest only counted. */
  firstRejection(): boolean {
    if (this.rejectedBefore) return false;
    this.rejectedBefore = true;
    return true;
  }

  /** A late message about the agent's own ended job (or a report already taken) arrived. */
  late(now: number): Overrun | null {
    if (this.lates.take(1, now)) return null;
    return this.overrun('late', `more than ${LATE_BURST} late messages about its ended jobs`);
  }

  /** A `job.exit.part` of a job running on this agent arrived. */
  part(jobId: string): Overrun | null {
    const n = (this.parts.get(jobId) ?? 0) + 1;
    this.parts.set(jobId, n);
    if (n <= EXIT_PARTS_PER_JOB) return null;
    return this.overrun('parts', `more than ${EXIT_PARTS_PER_JOB} job.exit.part messages for one job`);
  }

  /** How `jobId` was answered on this socket, if it was. */
  answeredAs(jobId: string): Answered | undefined {
    return this.answered.get(jobId);
  }

  /** Remembers that `jobId` was answered; false when it already was (answer once). */
  answer(jobId: string, why: Answered): boolean {
    if (this.answered.has(jobId)) return false;
    if (this.answered.size >= ANSWERED_IDS_MAX) this.answered.delete(this.answered.keys().next().value!);
    this.answered.set(jobId, why);
    return true;
  }

  /** A `job.artifact` report of `jobId`'s `stream` arrived; false when it already did on this socket. */
  report(jobId: string, stream: string): boolean {
    const key = `${jobId}/${stream}`;
    if (this.reports.has(key)) return false;
    if (this.reports.size >= ANSWERED_IDS_MAX) this.reports.delete(this.reports.values().next().value!);
    this.reports.add(key);
    return true;
  }

  /** The job went to this socket (job.start): messages about it are the agent's to send again. */
  started(jobId: string): void {
    this.answered.delete(jobId);
    this.parts.delete(jobId);
    this.reports.delete(`${jobId}/stdout`);
    this.reports.delete(`${jobId}/stderr`);
  }

  /** The job's exit arrived: its parts are counted afresh if the agent sends the result again. */
  ended(jobId: string): void {
    this.parts.delete(jobId);
  }

  private overrun(kind: BudgetKind, message: string): Overrun {
    this.over ??= { kind, message: `message budget exceeded: ${message}` };
    return this.over;
  }
}

/**
 * The type and job id of a `job.exit` or `job.exit.part` read from the start of its text,
 * without parsing the rest (up to WEBSOCKET_MESSAGE_MAX_BYTES): enough to drop a message about
 * a job already answered on this socket. The agent writes these keys first
 * (executor/agent.ts `exitMessages`); null when the text starts otherwise (it is then parsed).
 */
export function peekJobMessage(raw: string): { type: 'job.exit' | 'job.exit.part'; jobId: string } | null {
  const m = PEEK.exec(raw.slice(0, PEEK_CHARS));
  return m ? { type: m[1] as 'job.exit' | 'job.exit.part', jobId: m[2] } : null;
}
const PEEK = /^\{"type":"(job\.exit(?:\.part)?)","jobId":"([^"\\]{1,128})"/;
const PEEK_CHARS = 200;
