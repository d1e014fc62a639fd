/**
 * What the team's executor agents say on their sockets, applied: `hello` (claims checked against
 * the token's grant, in either protocol version the edge speaks), the jobs an agent holds (`running`;
 * protocol 2's `heartbeat` every interval), a job's exit (in parts when large), its error, how each artifact
 * upload ended, live output frames, and a job's egress proxy's asks and connection log (egress.ts).
 * Each socket has a message budget (agent-budget.ts): a message that changes nothing costs, and a
 * socket over its budget is refused (all it still sends is dropped unread), closed and audited.
 * Only the agent a job was sent to may report on it. Heartbeats (AGENT_PING) are answered by the
 * platform and never arrive here; one that does (no auto-response set) is answered the same way.
 */
import {
  AGENT_BUDGET_CLOSE,
  AGENT_PROTOCOL_CLOSE,
  EDGE_PROTOCOL_VERSIONS,
  PROTOCOL_VERSION,
  parseAgentMessage,
  type AgentHello,
  type JobExit,
} from '../contracts/agent-protocol.ts';
import { AGENT_CLAIM_REFUSED_CLOSE, checkAgentClaims, closeReason } from '../contracts/agent-grant.ts';
import { decodeOutputFrame } from '../contracts/output-frame.ts';
import { peekJobMessage, type AgentBudget, type Overrun } from './agent-budget.ts';
import type { AgentAttachment, AgentLink } from './agent-link.ts';
import type { ArtifactUploads } from './artifact-uploads.ts';
import type { Followers } from './followers.ts';
import type { Egress } from './egress.ts';
import type { DispatchHost } from './capability-host.ts';
import type { JobRecords } from './job-records.ts';
import type { JobRow, JobRows } from './job-rows.ts';
import type { JobTexts } from './job-texts.ts';
import type { LiveOutput } from './live-output.ts';
import type { Jobs } from './job-lifecycle.ts';
import type { InteractiveSessions } from './interactive-sessions.ts';
import { asErrorCode } from '../contracts/errors.ts';
import { inlineResult } from '../contracts/inline-result.ts';

/** Bytes of each live output frame passed on to callers following the job (progress shows the last line). */
const FOLLOW_OUTPUT_BYTES = 4096;

export interface AgentMessagesParts {
  link: Pick<AgentLink, 'attachmentOf' | 'audit' | 'bind' | 'budgetOf' | 'drop' | 'dropAndClose' | 'hear' | 'isRefused' | 'refuse' | 'send' | 'touch'>;
  jobs: Pick<Jobs, 'busy' | 'close' | 'pump' | 'reconcileHeld'>;
  rows: Pick<JobRows, 'get' | 'requeue'>;
  /** A job's spec (its inline cap, for an exit whose output comes from the live output). */
  records: Pick<JobRecords, 'spec'>;
  /** An exit's parts, kept until the exit arrives. */
  texts: Pick<JobTexts, 'putPart' | 'partsText'>;
  live: Pick<LiveOutput, 'append' | 'read'>;
  followers: Pick<Followers, 'emit' | 'settle'>;
  /** How each stream's upload ended, and the multipart uploads an agent abandoned. */
  uploads: { abortAbandoned: ArtifactUploads['abortAbandoned']; streams: Pick<ArtifactUploads['streams'], 'report'> };
  /** A job's egress proxy: its asks and its connection log (egress.ts). */
  egress: Pick<Egress, 'ask' | 'log'>;
  /** Interactive sessions: the acks of their stdin writes. */
  sessions: Pick<InteractiveSessions, 'acked'>;
  /** A job.exit was read (a trace step of the hot path). */
  onExitReceived(): void;
  /** A job's exit was stored: the streams it holds whole become artifacts (no upload of them follows). */
  onExitStored(jobId: string): void;
  /** A job's exit said its workspace's size (workspaces.ts). */
  onWorkspaceReport(agentId: string, report: { id: string; bytes: number }, now: number): void;
}

type Reply = Promise<void> | undefined;

export class AgentMessages {
  private readonly host: Pick<DispatchHost, 'team' | 'heartbeatMs' | 'now' | 'wake'>;
  private readonly parts: AgentMessagesParts;

  constructor(host: Pick<DispatchHost, 'team' | 'heartbeatMs' | 'now' | 'wake'>, parts: AgentMessagesParts) {
    this.host = host;
    this.parts = parts;
  }

  async receive(ws: WebSocket, raw: string | ArrayBuffer): Promise<void> {
    const { link, rows, texts } = this.parts;
    const att = link.attachmentOf(ws);
    if (!att) return;
    // Closed for its budget: what it still sends is dropped unread (the DO checks this first too).
    if (link.isRefused(ws)) return;
    const budget = link.budgetOf(ws);
    const now = this.host.now();
    if (typeof raw !== 'string') return this.onOutputFrame(ws, att, budget, raw, now);
    // A job already answered on this socket: dropped (its exit acknowledged again) without parsing or storage reads.
    const peeked = att.agentId ? peekJobMessage(raw) : null;
    const again = peeked && budget.answeredAs(peeked.jobId);
    if (peeked && again) {
      if (peeked.type === 'job.exit' && again === 'ended') link.send(ws, { type: 'job.ack', jobId: peeked.jobId });
      return this.spend(ws, att, again === 'ended' ? budget.late(now) : budget.stranger(0, now));
    }
    const parsed = parseAgentMessage(raw);
    if (!parsed.ok) {
      // One line per socket: a junk flood must not turn into a log flood.
      if (budget.firstRejection()) console.warn(`agent ${att.agentId ?? '(before hello)'}: rejected message: ${parsed.reason}`);
      return this.spend(ws, att, budget.malformed(raw.length, now));
    }
    const msg = parsed.message;
    // What an agent sends once per heartbeat at most (a protocol-3 agent: `running`, and a ping only if no auto-response is set).
    if (msg.type === 'hello' || msg.type === 'heartbeat' || msg.type === 'ping' || msg.type === 'running') {
      const over = budget.heartbeat(now);
      if (over) return this.overBudget(ws, att, over);
    }
    if (msg.type === 'hello') return this.onHello(ws, att, msg, now);
    if (!att.agentId) {
      ws.close(1002, 'hello first');
      return;
    }
    const agentId = att.agentId;
    link.hear(ws, now);
    switch (msg.type) {
      case 'ping': {
        link.send(ws, { type: 'pong' });
        return;
      }
      case 'running': {
        this.parts.jobs.reconcileHeld(agentId, msg.jobs, now, 2 * this.host.heartbeatMs);
        return;
      }
      case 'heartbeat': {
        // Protocol 2: every interval, with its jobs; its time is written as before (agent-link.ts `touch`).
        link.touch(agentId, now);
        this.parts.jobs.reconcileHeld(agentId, msg.running, now, 2 * this.host.heartbeatMs);
        return;
      }
      case 'job.exit.part': {
        const row = rows.get(msg.jobId);
        if (row?.state !== 'running' || row.agent !== agentId) return this.strayAbout(ws, att, budget, msg.jobId, row, raw.length, 1, now);
        const over = budget.part(msg.jobId);
        if (over) return this.overBudget(ws, att, over);
        texts.putPart(msg.jobId, msg.stream, msg.seq, msg.data);
        return;
      }
      case 'job.exit': {
        const row = rows.get(msg.jobId);
        if (!row || row.agent !== agentId) {
          // Only the agent a job was assigned to may report its end.
          if (row) console.warn(`agent ${agentId} reported the end of job ${msg.jobId}, which runs on ${row.agent ?? 'no agent'}; ignored`);
          return this.strayAbout(ws, att, budget, msg.jobId, row, raw.length, 1, now);
        }
        this.parts.onExitReceived();
        budget.ended(msg.jobId);
        if (row.state === 'running') {
          let exit: JobExit = msg;
          if (msg.inlineFromLive) exit = this.inlineFromLive(msg);
          else if (msg.parts) {
            const stdout = texts.partsText(msg.jobId, 'stdout', msg.parts.stdout);
            const stderr = texts.partsText(msg.jobId, 'stderr', msg.parts.stderr);
            if (stdout === null || stderr === null) return; // parts missing: the agent re-sends everything after a reconnect
            exit = { ...msg, stdout, stderr, parts: undefined };
          }
          if (msg.workspace) this.parts.onWorkspaceReport(agentId, msg.workspace, now);
          if (this.parts.jobs.close(msg.jobId, exit.state, { exit, fromAgent: agentId })) this.parts.onExitStored(msg.jobId);
        } else {
          // Stored before (a re-send whose ack was lost): acknowledged again; a further copy on this socket is a stray.
          budget.answer(msg.jobId, 'ended');
        }
        // Stored now or before: the agent may forget it.
        link.send(ws, { type: 'job.ack', jobId: msg.jobId });
        await this.parts.jobs.pump();
        return;
      }
      case 'job.artifact': {
        const row = rows.get(msg.jobId);
        // An agent reports each stream once per connection; the same report again changes nothing.
        const first = budget.report(msg.jobId, msg.stream);
        if (!row || row.agent !== agentId || row.state === 'queued') {
          // Only the agent a job was assigned to may say how its upload ended.
          if (row) console.warn(`agent ${agentId} reported the ${msg.stream} artifact of job ${msg.jobId}, which is not its job; ignored`);
          // A job the edge does not know never takes the report: the agent may forget it.
          else if (first) link.send(ws, { type: 'job.ack', jobId: msg.jobId, stream: msg.stream });
          return this.strayAbout(ws, att, budget, msg.jobId, row, raw.length, 1, now);
        }
        if (this.parts.uploads.streams.report(msg.jobId, msg.stream)) {
          console.warn(`job ${msg.jobId}: the ${msg.stream} artifact was not stored (agent says ${msg.state}${msg.error ? `: ${msg.error}` : ''})`);
          this.parts.followers.settle(msg.jobId);
          await this.parts.uploads.abortAbandoned();
        }
        link.send(ws, { type: 'job.ack', jobId: msg.jobId, stream: msg.stream });
        return first ? undefined : this.spend(ws, att, budget.late(now));
      }
      case 'job.error': {
        const row = rows.get(msg.jobId);
        if (row?.state !== 'running' || row.agent !== agentId) return this.strayAbout(ws, att, budget, msg.jobId, row, raw.length, 1, now);
        // A full agent (its own count raced ours): the job goes back to the head of the queue.
        if (msg.code === 'capacity') rows.requeue(msg.jobId);
        // An agent's code outside the vocabulary (a newer or a hostile agent) is the agent's failure to start it.
        else
          this.parts.jobs.close(msg.jobId, 'failed_to_start', {
            error: { code: asErrorCode(msg.code, 'spawn_failed'), message: msg.message },
            fromAgent: agentId,
          });
        await this.parts.jobs.pump();
        return;
      }
      case 'job.input.ack': {
        // A write nobody waits for (late, or about another agent's job) changed nothing and costs.
        if (this.parts.sessions.acked(agentId, msg)) return;
        return this.spend(ws, att, budget.late(now));
      }
      case 'workspace.deleted': {
        if (!msg.ok) console.warn(`agent ${agentId} did not delete workspace ${msg.id}: ${msg.message ?? 'no reason given'}`);
        return;
      }
      case 'egress.ask':
      case 'egress.log': {
        const verdict = msg.type === 'egress.ask' ? await this.parts.egress.ask(agentId, msg, now) : await this.parts.egress.log(agentId, msg, now);
        if (verdict === 'ok') return;
        // Only the agent a job runs on speaks for its network: another's (or an unknown job's) changes nothing and costs.
        if (verdict === 'stranger') {
          console.warn(`agent ${agentId} sent ${msg.type} about job ${msg.jobId}, which is not its job; ignored`);
          return this.spend(ws, att, budget.stranger(raw.length, now));
        }
        return this.spend(ws, att, budget.late(now));
      }
    }
  }

  /**
   * The exit with its inline output rebuilt from the live output this connection relayed (the
   * agent left it out: `inlineFromLive`), as the agent would have sent it: the same function over
   * the same first bytes, the job's own inline cap, and the stream totals the agent reports. Kept
   * bytes short of what the result needs (only a broken or hostile agent) give what there is,
   * flagged truncated; the exit itself is never lost.
   */
  private inlineFromLive(msg: JobExit): JobExit {
    const { inlineFromLive: _, parts: __, ...exit } = msg;
    const spec = this.parts.records.spec(msg.jobId);
    if (!spec) console.warn(`job ${msg.jobId}: no stored spec to take the inline cap from; its inline output is left empty`);
    const cap = spec?.limits.inlineBytes ?? 0;
    const head = (stream: 'stdout' | 'stderr') => {
      const total = msg.streams[stream].bytes;
      const need = Math.min(total, cap);
      // An empty stream (most jobs' stderr) costs no storage read.
      const data = need === 0 ? new Uint8Array(0) : this.parts.live.read(msg.jobId, stream, 0, need).data;
      if (data.byteLength < need) {
        console.warn(
          `job ${msg.jobId}: its exit leaves the inline ${stream} to the live output, but only ${data.byteLength} of the ${need} bytes it needs were kept; marked truncated`,
        );
      }
      return { head: data, total };
    };
    return { ...exit, ...inlineResult(head('stdout'), head('stderr'), cap) };
  }

  /**
   * A message about a job that does not run on this agent changed nothing. The first about each
   * job is answered (`job.ack`: forget it) and the job remembered, so later ones are dropped
   * without a storage read. About the agent's own ended job it is late (`ownCost`: its late
   * output costs nothing, the rest one unit); about a stranger (unknown, or another agent's job)
   * it costs its size, since it was parsed and looked up for nothing.
   */
  private strayAbout(
    ws: WebSocket,
    att: AgentAttachment,
    budget: AgentBudget,
    jobId: string,
    row: JobRow | null,
    bytes: number,
    ownCost: 0 | 1,
    now: number,
  ): Reply {
    const own = row !== null && row.agent === att.agentId;
    if (budget.answer(jobId, own ? 'ended' : 'stranger')) this.parts.link.send(ws, { type: 'job.ack', jobId });
    if (own) return ownCost ? this.spend(ws, att, budget.late(now)) : undefined;
    return this.spend(ws, att, budget.stranger(bytes, now));
  }

  /** Closes the socket when what it just sent took it over its budget. */
  private spend(ws: WebSocket, att: AgentAttachment, over: Overrun | null): Reply {
    return over ? this.overBudget(ws, att, over) : undefined;
  }

  /**
   * Closes a socket that went over its message budget and audits it (once: whatever it sends
   * after is dropped unread). The agent's jobs are orphaned like on any disconnect: a real agent
   * that reconnects in time keeps them.
   */
  private async overBudget(ws: WebSocket, att: AgentAttachment, over: Overrun): Promise<void> {
    const who = att.agentId ?? '(before hello)';
    // Refused before anything else: the messages already queued behind this one are dropped unread.
    this.parts.link.refuse(ws);
    this.parts.link.dropAndClose(ws, over.message, AGENT_BUDGET_CLOSE, over.message);
    console.warn(`agent ${who} (subject ${att.subject}): ${over.message}; connection closed`);
    await this.parts.link.audit(att, `agent ${who}: ${over.message}; connection closed (${AGENT_BUDGET_CLOSE})`, { agentId: att.agentId, budget: over.kind });
  }

  /**
   * Live output (a binary frame): kept by byte offset while the job runs on this agent. Output
   * is bulk data, not a sign of life: only the agent's JSON messages (heartbeats first) count as
   * liveness, so a flood of output can never stand in for heartbeats that do not arrive. Frames
   * of the agent's own ended jobs (one the edge gave up on may still run) cost nothing; others do.
   */
  private onOutputFrame(ws: WebSocket, att: AgentAttachment, budget: AgentBudget, raw: ArrayBuffer, now: number): Reply {
    // Output before hello, or a frame that is no output frame: malformed.
    if (!att.agentId) return this.spend(ws, att, budget.malformed(raw.byteLength, now));
    const parsed = decodeOutputFrame(raw);
    if (!parsed.ok) {
      if (budget.firstRejection()) console.warn(`agent ${att.agentId}: rejected output frame: ${parsed.reason}`);
      return this.spend(ws, att, budget.malformed(raw.byteLength, now));
    }
    const f = parsed.frame;
    const again = budget.answeredAs(f.jobId);
    if (again) return again === 'ended' ? undefined : this.spend(ws, att, budget.stranger(0, now));
    const row = this.parts.rows.get(f.jobId);
    if (row?.state !== 'running' || row.agent !== att.agentId) return this.strayAbout(ws, att, budget, f.jobId, row, 0, 0, now);
    if (this.parts.live.append(f.jobId, f.stream, f.offset, f.data) === 0) return undefined;
    // Followers turn output into progress (its last line): the tail is enough, and keeps their streams small.
    const tail = f.data.subarray(Math.max(0, f.data.byteLength - FOLLOW_OUTPUT_BYTES));
    this.parts.followers.emit(f.jobId, { type: 'output', stream: f.stream, data: new TextDecoder().decode(tail) });
    return undefined;
  }

  private async onHello(ws: WebSocket, att: AgentAttachment, hello: AgentHello, now: number): Promise<void> {
    if (!EDGE_PROTOCOL_VERSIONS.includes(hello.v)) {
      // Before anything else: a mismatched pair must fail loudly, never drop messages it misreads.
      const reason = `agent protocol v${hello.v} is not spoken here: this gateway speaks v${PROTOCOL_VERSION} (and ${EDGE_PROTOCOL_VERSIONS.filter(
        (v) => v !== PROTOCOL_VERSION,
      )
        .map((v) => `v${v}`)
        .join(', ')}); install the agent of the gateway's release`;
      console.warn(`refused hello of agent ${hello.agentId} (subject ${att.subject}): ${reason}`);
      this.parts.link.dropAndClose(ws, 'said hello in another protocol version', AGENT_PROTOCOL_CLOSE, closeReason(reason));
      return;
    }
    // Placement (sandbox.minimum, labels, agent) trusts the registry, so only granted claims reach it.
    const refused = checkAgentClaims(att.grant, hello);
    if (refused) {
      console.warn(`refused hello of agent ${hello.agentId} (subject ${att.subject}): ${refused.message}`);
      if (att.agentId) this.parts.link.drop(ws, 'claimed more than its token grants');
      try {
        ws.close(AGENT_CLAIM_REFUSED_CLOSE, closeReason(refused.message));
      } catch {
        /* gone */
      }
      return this.parts.link.audit(att, refused.message, { agentId: hello.agentId, sandbox: hello.sandbox, labels: hello.labels, claim: refused.claim });
    }
    if (att.agentId && att.agentId !== hello.agentId) {
      ws.close(1002, 'an agent id cannot change on a connection');
      return;
    }
    // Same identity again (a reconnect, or a restarted process): the new connection replaces the old one.
    if (!this.parts.link.bind(ws, att, hello, () => this.parts.jobs.busy(hello.agentId), now)) return;
    // Jobs this agent should hold but does not list are orphaned: lost unless a connection reports them in time.
    this.parts.jobs.reconcileHeld(hello.agentId, hello.running, now, 0);
    // Welcomed in its own version: an agent checks that the welcome speaks it.
    this.parts.link.send(ws, { type: 'welcome', v: hello.v, team: await this.host.team(), heartbeatMs: this.host.heartbeatMs });
    await this.parts.jobs.pump();
    await this.host.wake();
  }
}
