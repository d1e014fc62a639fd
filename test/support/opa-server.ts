/**
 * A small OPA-compatible HTTP server for tests, on 127.0.0.1 (random port). There is no `opa`
 * binary in this environment (nothing to install it from), so this stands in for one: it answers
 * `POST /v1/data/{path}` with `{"input": …}` the way OPA's Data API does — `{"result": …}`, or
 * `{}` when the rule is undefined — and can misbehave on purpose to test fail-closed handling.
 *
 *   const opa = await startOpaServer();
 *   opa.set('mcp/subprocess', { allow: true });       // {"result": {"allow": true}}
 *   opa.set('gate/slow', { sleepMs: 5000 });          // answers after 5 s (then `{}` or `next`)
 *   opa.set('gate/broken', { status: 500 });          // HTTP 500
 *   opa.requests.at(-1)!.input                        // the input document received
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

type OpaBehavior =
  /** `{"result": {"allow": <allow>}}` */
  | { allow: boolean }
  /** `{"result": <result>}` verbatim: a bare boolean, `{"allow": "yes"}`, … */
  | { result: unknown }
  /** `{}`: the rule is undefined for this input (OPA's answer for a missing document). */
  | { undefined: true }
  /** A non-2xx answer with an optional body. */
  | { status: number; body?: string }
  /** A 200 whose body is not JSON. */
  | { garbage: true; body?: string }
  /** Wait, then behave like `then` (default: undefined result). */
  | { sleepMs: number; next?: OpaBehavior }
  /** Accept the request and destroy the connection without answering. */
  | { hangUp: true }
  /** Decide per input. */
  | { decide: (input: unknown) => OpaBehavior };

interface OpaRequest {
  path: string;
  method: string;
  input: unknown;
  /** The whole parsed body (`{"input": …}`), or the raw text if it did not parse. */
  body: unknown;
  headers: IncomingMessage['headers'];
}

export interface OpaServer {
  /** e.g. http://127.0.0.1:40123 — an evaluator `url`. */
  url: string;
  /** Sets what `POST /v1/data/{path}` answers (path without leading slash, e.g. `mcp/subprocess`). */
  set(path: string, behavior: OpaBehavior): void;
  /** Every request received, in order. */
  requests: OpaRequest[];
  /** Forgets behaviors and recorded requests. */
  reset(): void;
  close(): Promise<void>;
}

export async function startOpaServer(): Promise<OpaServer> {
  const behaviors = new Map<string, OpaBehavior>();
  const requests: OpaRequest[] = [];
  const timers = new Set<ReturnType<typeof setTimeout>>();

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const m = /^\/v1\/data\/(.*?)\/?(?:\?.*)?$/.exec(req.url ?? '');
      if (!m) return json(res, 404, { code: 'resource_not_found', message: 'only /v1/data/{path} is served' });
      const path = decodeURIComponent(m[1]);
      let body: unknown = text;
      let input: unknown;
      try {
        body = text === '' ? {} : JSON.parse(text);
        input = (body as { input?: unknown }).input;
      } catch {
        requests.push({ path, method: req.method ?? '', input: undefined, body, headers: req.headers });
        return json(res, 400, { code: 'invalid_parameter', message: 'body must be JSON' });
      }
      requests.push({ path, method: req.method ?? '', input, body, headers: req.headers });
      if (req.method !== 'POST') return json(res, 405, { code: 'method_not_allowed', message: 'POST only in this stand-in' });
      respond(res, behaviors.get(path) ?? { undefined: true }, input);
    });
  });

  function respond(res: ServerResponse, b: OpaBehavior, input: unknown): void {
    if ('decide' in b) {
      respond(res, b.decide(input), input);
      return;
    }
    if ('sleepMs' in b) {
      const t = setTimeout(() => {
        timers.delete(t);
        if (!res.destroyed) respond(res, b.next ?? { undefined: true }, input);
      }, b.sleepMs);
      timers.add(t);
      return;
    }
    if ('hangUp' in b) {
      res.socket?.destroy();
      return;
    }
    if ('status' in b) {
      res.writeHead(b.status, { 'Content-Type': 'application/json' });
      res.end(b.body ?? JSON.stringify({ code: 'internal_error', message: `stand-in error ${b.status}` }));
      return;
    }
    if ('garbage' in b) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(b.body ?? '{"result": {"allow": tru');
      return;
    }
    if ('undefined' in b) json(res, 200, {});
    else if ('allow' in b) json(res, 200, { result: { allow: b.allow } });
    else json(res, 200, { result: b.result });
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    set: (path, behavior) => behaviors.set(path.replace(/^\/+|\/+$/g, ''), behavior),
    requests,
    reset() {
      behaviors.clear();
      requests.length = 0;
    },
    close() {
      for (const t of timers) clearTimeout(t);
      timers.clear();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}
