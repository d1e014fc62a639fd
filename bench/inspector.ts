/**
 * The DevTools (V8 inspector) protocol of the gateway's isolate, through the inspector proxy
 * `wrangler dev` serves (harness: `gw.inspectorPort()`). bench/profile-gateway.ts takes CPU
 * profiles through it, bench/scale.ts reads the isolate's heap.
 */
import type { Gateway } from '../test/e2e/harness.ts';

export interface InspectorTarget {
  id: string;
  title: string;
  webSocketDebuggerUrl: string;
}

export interface InspectorSession {
  send<T>(method: string, params?: object, ms?: number): Promise<T>;
  close(): void;
}

/** What the proxy lists: one target per Worker of the dev session (miniflare names them). */
export async function inspectorTargets(gw: Gateway): Promise<InspectorTarget[]> {
  return (await (await fetch(`http://127.0.0.1:${gw.inspectorPort()}/json`)).json()) as InspectorTarget[];
}

/** One DevTools protocol session over a WebSocket. */
export async function inspectorSession(wsUrl: string): Promise<InspectorSession> {
  // wrangler's inspector proxy refuses a client without an allowed Origin (DevTools sends one).
  const ws = new WebSocket(wsUrl, { headers: { Origin: 'http://localhost' } } as unknown as string[]);
  await new Promise<void>((ok, bad) => {
    ws.addEventListener('open', () => ok());
    ws.addEventListener('error', () => bad(new Error(`cannot open ${wsUrl}`)));
  });
  let next = 0;
  const waiting = new Map<number, (m: { result?: unknown; error?: { message: string } }) => void>();
  ws.addEventListener('message', (e: { data: unknown }) => {
    const m = JSON.parse(String(e.data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (m.id !== undefined) waiting.get(m.id)?.(m);
  });
  const send = <T>(method: string, params: object = {}, ms = 30_000) =>
    new Promise<T>((ok, bad) => {
      const id = ++next;
      const t = setTimeout(() => bad(new Error(`${method}: no answer in ${ms} ms`)), ms);
      waiting.set(id, (m) => {
        waiting.delete(id);
        clearTimeout(t);
        if (m.error) bad(new Error(`${method}: ${m.error.message}`));
        else ok(m.result as T);
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
  return { send, close: () => ws.close() };
}
