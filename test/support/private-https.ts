/**
 * An HTTPS server on 127.0.0.1 with a certificate a private CA (private-ca.ts) signed: the stand-in
 * for a public or a company's host in the e2e tests, reached through the agent's test mode
 * (docs/network.md, "Test mode"). It records what every request carried (its Host, TLS SNI and
 * Authorization), and for the hosts given answers 401 unless the request's Authorization is exactly
 * the one expected — as a private registry or Git server does without a token.
 */
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { PrivateCa } from './private-ca.ts';

export interface SeenRequest {
  method: string;
  url: string;
  /** The Host header's name (without a port). */
  host: string;
  /** The name the client asked for in its TLS ClientHello. */
  sni: string | undefined;
  authorization: string | undefined;
}

export interface PrivateHttps {
  port: number;
  /** Every request, in order (401s included). */
  seen: SeenRequest[];
  server: Server;
  close(): Promise<void>;
}

export interface PrivateHttpsOptions {
  /** host → the exact Authorization a request for that host must carry; other hosts need none. */
  requireAuthorization?: Record<string, string>;
  /** The 401's WWW-Authenticate (what the client is told to send). */
  challenge?: string;
}

export async function startPrivateHttps(
  ca: PrivateCa,
  o: PrivateHttpsOptions,
  handle: (req: IncomingMessage, res: ServerResponse, seen: SeenRequest) => void,
): Promise<PrivateHttps> {
  const seen: SeenRequest[] = [];
  const server = createServer({ cert: ca.cert, key: ca.key }, (req, res) => {
    const s: SeenRequest = {
      method: req.method ?? '',
      url: req.url ?? '',
      host: (req.headers.host ?? '').replace(/:\d+$/, ''),
      sni: (req.socket as { servername?: string }).servername,
      authorization: req.headers.authorization,
    };
    seen.push(s);
    const expected = o.requireAuthorization?.[s.host];
    if (expected !== undefined && s.authorization !== expected) {
      // The body is read first: a client still sending it would see a reset instead of the 401.
      req.resume();
      req.on('end', () =>
        res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': o.challenge ?? 'Bearer' }).end('{"error":"authentication required"}\n'),
      );
      return;
    }
    handle(req, res, s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as { port: number }).port,
    seen,
    server,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
