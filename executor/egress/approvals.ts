/**
 * Asking a person about a host the grant does not list (`unlisted: ask`): one ask to the edge per
 * host, port and method at a time, and the answer held for the rest of the job (a timeout is not).
 * Approving GET does not let a POST through; a tunnel's method (inside TLS) is not visible, so a
 * CONNECT is approved as CONNECT.
 */
import { randomBytes } from 'node:crypto';
import type { EgressAnswer, EgressAsk } from '../../src/contracts/network.ts';

export interface Answer {
  allow: boolean;
  by: string;
}

export class Approvals {
  private readonly jobId: string;
  private readonly send: (m: EgressAsk) => boolean;
  private readonly waitMs: number;
  /** `host:port method` a person allowed or denied, for the rest of the job. */
  private readonly decided = new Map<string, Answer>();
  private readonly asking = new Map<string, Promise<Answer>>();
  /** Asks without an answer yet, by id: the ask as sent (sent again after a reconnect, `askAgain`) and what its answer settles. */
  private readonly waiting = new Map<string, { ask: EgressAsk; settle: (a: Answer) => void }>();
  private closed = false;

  /** `send`: sends an ask to the edge, false when it cannot be reached now; `waitMs`: how long an ask waits for its answer. */
  constructor(o: { jobId: string; send: (m: EgressAsk) => boolean; waitMs: number }) {
    this.jobId = o.jobId;
    this.send = o.send;
    this.waitMs = o.waitMs;
  }

  /** The answer for `host:port method`: known, already being asked, or asked now. */
  ask(host: string, port: number, method: string | undefined): Promise<Answer> {
    const key = `${host}:${port} ${method ?? 'CONNECT'}`;
    const known = this.decided.get(key);
    if (known) return Promise.resolve(known);
    let p = this.asking.get(key);
    if (p) return p;
    const askId = randomBytes(8).toString('hex');
    const wait = this.waitMs;
    p = new Promise<Answer>((resolve) => {
      const timer = setTimeout(() => done({ allow: false, by: `no answer within ${Math.round(wait / 1000)} s` }, false), wait);
      const done = (a: Answer, keep: boolean) => {
        clearTimeout(timer);
        this.waiting.delete(askId);
        this.asking.delete(key);
        if (keep && !this.closed) this.decided.set(key, a);
        resolve(a);
      };
      const ask: EgressAsk = {
        type: 'egress.ask',
        jobId: this.jobId,
        askId,
        host,
        port,
        ...(method && method !== 'CONNECT' ? { method: method.slice(0, 16) } : {}),
      };
      this.waiting.set(askId, { ask, settle: (a) => done(a, true) });
      const sent = this.send(ask);
      if (!sent) done({ allow: false, by: 'the gateway is not reachable to ask' }, false);
    });
    this.asking.set(key, p);
    return p;
  }

  /** An `egress.answer` for this job; false when no connection waits for it. */
  answer(a: EgressAnswer): boolean {
    const w = this.waiting.get(a.askId);
    if (!w) return false;
    w.settle({ allow: a.decision === 'allow', by: a.by });
    return true;
  }

  /**
   * Sends every ask still waiting again, as it was (after the agent reconnected): an answer the
   * edge sent while the agent was away never arrived, and the edge answers an ask it already
   * decided again (src/dispatch/egress.ts). Without this the connection would wait for its own
   * time to run out and be refused though a person had allowed it.
   */
  askAgain(): void {
    for (const { ask } of this.waiting.values()) this.send(ask);
  }

  /** The job ended: every waiting ask is answered with a refusal. */
  close(): void {
    this.closed = true;
    for (const w of this.waiting.values()) w.settle({ allow: false, by: 'the job ended' });
  }
}
