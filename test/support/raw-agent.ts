/** A hand-made agent connection to a gateway: what a holder of an agent token can send that the real agent never would. */
import { WebSocket } from 'undici';

/** The edge's messages as parsed JSON; each test reads the fields it checks. */
type Message = Record<string, any>;

export interface RawAgent {
  ws: WebSocket;
  /** Every message the gateway sent, parsed, in order. */
  messages: Message[];
  closed: Promise<{ code: number; reason: string }>;
}

export function rawAgent(gatewayUrl: string, token: string): Promise<RawAgent> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${gatewayUrl.replace(/^http/, 'ws')}/agent/v1/connect`, { headers: { Authorization: `Bearer ${token}` } });
    const messages: Message[] = [];
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.addEventListener('close', (e) => r({ code: e.code, reason: e.reason })));
    ws.addEventListener('message', (e) => messages.push(JSON.parse(String(e.data)) as Message));
    ws.addEventListener('open', () => resolve({ ws, messages, closed }));
    ws.addEventListener('error', () => reject(new Error('raw agent could not connect')));
  });
}
