/**
 * What the proxy's two ways in — plain HTTP forwarding (http-forward.ts) and CONNECT tunnels
 * (tunnel.ts) — need of the proxy (proxy.ts): the grant's verdict on a host, the one address to
 * dial, the job's byte caps and each connection's record.
 */
import type { Socket } from 'node:net';
import type { CredentialBinding, NetworkAllow } from '../../src/contracts/network.ts';
import type { Host } from './address.ts';
import type { Conn } from './connection-log.ts';
import type { AgentCa } from './agent-ca.ts';

/** A host the proxy may look at: an address or a name (an invalid one is refused before). */
export type Target = Exclude<Host, { kind: 'invalid' }>;

export type Verdict =
  | { ok: true; reason: string; entry: NetworkAllow | null; index: number | null }
  | { ok: false; status: number; reason: string; policyKey?: string };

export type Resolved = { ok: true; address: string; port: number } | { ok: false; status: number; reason: string; policyKey?: string };

export interface EgressGate {
  /** Opens a connection's record. */
  begin(host: string, port: number, method: string): Conn;
  /** Records a refused connection (and logs it); `policyKey`: the key of the team policy that would allow it. */
  refuse(conn: Conn, reason: string, policyKey?: string): void;
  /** Writes the connection's record once (its end), with `why` added to the reason. */
  finish(conn: Conn, why: string | undefined): void;
  /** The grant's verdict, with an ask to the edge for an unlisted host when the grant says `ask`. */
  check(target: Target, port: number, method: string | undefined): Promise<Verdict>;
  /** The one address to dial for an allowed target, every answer judged. */
  resolve(target: Target, port: number, allowed: { entry: NetworkAllow | null; index: number | null }): Promise<Resolved>;
  dial(address: string, port: number): Socket;
  /** Adds `n` bytes to the job's total; past the cap closes every connection of the job and returns false. */
  count(conn: Conn, dir: 'up' | 'down', n: number): boolean;
  /** The job ended: nothing new goes out. */
  ended(): boolean;
  /** Whether one of the job's byte caps was passed. */
  capPassed(): boolean;
  /** How long a tunnel waits for the client's ClientHello. */
  readonly helloWaitMs: number;
  /**
   * Inside a credential tunnel the proxy reads each request, so an entry's `methods` apply there too: the refusal
   * when the grant allows this host and port only for other methods, else null.
   */
  methodRefusal(host: string, port: number, method: string): { reason: string; policyKey: string } | null;
  /** For a host the job's credentials are bound to: what the proxy needs to add them (credential-forward.ts); null otherwise. */
  credentialRoute(host: string, port: number): CredentialRoute | null;
}

/** A binding with its value, as the proxy holds it for one job (memory only). */
export interface HeldCredential {
  binding: CredentialBinding;
  value: string;
}

/** What the proxy needs to add a job's credentials on a tunnel to one of their hosts (credential-forward.ts). */
export interface CredentialRoute {
  ca: AgentCa;
  credentials: HeldCredential[];
  /** Extra CAs to verify upstreams with, beside the system's (the agent's own trust; tests' private CA). */
  upstreamCas?: string[];
}
