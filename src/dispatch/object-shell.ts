/**
 * The platform's side of the team's Durable Object: what the runtime calls on its own — the agents' WebSocket
 * upgrade (`fetch`), their messages and closes, the alarm — and the plumbing every RPC method shares (the
 * capabilities built on first use over the object's host, each call counted as a wake-up). The RPC methods the
 * edge calls are the subclass's, `TeamDispatcher` (team-dispatcher.ts); the capabilities are wired in capabilities.ts.
 */
import { DurableObject } from 'cloudflare:workers';
import type { Env } from '../env.ts';
import { workersPlan } from '../platform/plan.ts';
import { stamp } from '../contracts/trace.ts';
import { capabilities, type Capabilities } from './capabilities.ts';
import type { DispatchHost } from './capability-host.ts';
import { objectHost } from './object-host.ts';
import { DeletionMark } from './team-erasure.ts';
import { Usage } from './usage.ts';

export abstract class TeamObjectShell extends DurableObject<Env> {
  protected readonly host: DispatchHost;
  private caps: Capabilities | null = null;
  protected readonly deletion: DeletionMark;
  /** What this instance costs, in memory (usage.ts): its wake-ups, SQL statements and rows, its own D1/R2 work. */
  protected readonly meter = new Usage();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.host = objectHost(ctx, env, this.meter, { wakes: () => this.c.wakes, audit: (e) => void this.c.auditLog.record(e) });
    this.deletion = new DeletionMark(ctx.storage);
  }

  /** Built (and their migrations run) on first use: `ping` starts an object without touching its storage. */
  protected get c(): Capabilities {
    this.caps ??= capabilities(this.host, { plan: workersPlan(this.env), trace: (step) => stamp(this.env, step) });
    return this.caps;
  }

  /** Forgets the built capabilities (their storage was erased): the next use builds them again. */
  protected dropCapabilities(): void {
    this.caps = null;
  }

  /** An RPC call that changes what the alarm is for: run as `rpc`, then the alarm is moved. */
  protected async rpcThenWake<T>(call: () => T): Promise<Awaited<T>> {
    const r = await this.rpc(call);
    await this.host.wake();
    return r;
  }

  /** A read of the history: run as `rpc` once what an older deployment left in D1 is moved (legacy-import.ts). */
  protected historyRpc<T>(read: () => T): Promise<T> {
    return this.rpc(async () => {
      await this.c.legacy.catchUp();
      return read();
    });
  }

  /** An RPC call: counted as a wake-up of the object (usage.ts), then run. */
  protected rpc<T>(call: () => T): T {
    this.meter.wake('rpc');
    return call();
  }

  // ================= platform events: the agents' socket upgrade, their messages, the alarm =================

  /**
   * Agent WebSocket upgrades are the one thing that still arrives as `fetch`: a WebSocket can only
   * be handed over in an HTTP 101 response. The Worker has verified the token; it passes identity.
   */
  async fetch(request: Request): Promise<Response> {
    this.meter.wake('fetch');
    if (request.headers.get('Upgrade')?.toLowerCase() !== 'websocket') {
      return Response.json({ error: { code: 'invalid_argument', message: 'expected a WebSocket upgrade' } }, { status: 426 });
    }
    const who = this.c.link.attachmentFor(request);
    if (!who.ok) return Response.json({ error: { code: 'internal', message: who.message } }, { status: 500 });
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    this.ctx.acceptWebSocket(server);
    this.c.link.attach(server, who.att);
    await this.host.wake();
    return new Response(null, { status: 101, webSocket: client });
  }

  /**
   * The platform hands the object each message of each socket in turn, even ones that queued up
   * behind the message that took a socket over its budget (and wakes a hibernated object for
   * them): a refused socket's are dropped here, with one lookup and no promise, parse or storage.
   */
  webSocketMessage(ws: WebSocket, raw: string | ArrayBuffer): Promise<void> | undefined {
    this.meter.wake('message');
    if (this.c.link.isRefused(ws)) return undefined;
    return this.c.messages.receive(ws, raw);
  }

  webSocketClose(ws: WebSocket, code: number, reason: string): void {
    this.c.link.drop(ws, `closed (${code}${reason ? `: ${reason}` : ''})`);
  }

  webSocketError(ws: WebSocket, error: unknown): void {
    this.c.link.drop(ws, `socket error: ${String(error)}`);
  }

  /** Each capability's timed work in the order capabilities.ts declares (`alarm`), then the next wake-up. */
  async alarm(): Promise<void> {
    this.meter.wake('alarm');
    const now = this.host.now();
    for (const work of this.c.alarm) await work.onAlarm(now);
    await this.host.wake();
  }
}
