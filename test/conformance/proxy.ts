/**
 * A loopback forwarder that adds a bearer token to every request: the official conformance
 * suite has no option for credentials, and the gateway refuses anonymous callers. The proxy's
 * own address in Host/Origin becomes the gateway's (as if the client had connected directly);
 * any other Host or Origin passes through untouched, so DNS-rebinding attacks reach the gateway
 * as sent. Responses stream back as they arrive (SSE).
 */
import { createServer, request, type Server } from 'node:http';

export interface AuthProxy {
  url: string;
  close(): Promise<void>;
}

/** `rewrite: false`: Host and Origin pass as sent, as through a dev server's proxy on another loopback port. */
export async function startAuthProxy(target: string, token: string, o: { rewrite?: boolean } = {}): Promise<AuthProxy> {
  const upstream = new URL(target);
  let self = '';
  const server: Server = createServer((req, res) => {
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    if (o.rewrite !== false && headers.host === self) headers.host = upstream.host;
    if (o.rewrite !== false && headers.origin === `http://${self}`) headers.origin = upstream.origin;
    const out = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    out.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`proxy: ${e.message}`);
    });
    // A client that hangs up closes the upstream request too (2026-era cancellation).
    res.on('close', () => out.destroy());
    req.pipe(out);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as { port: number };
  self = `127.0.0.1:${port}`;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
