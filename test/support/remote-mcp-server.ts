/**
 * A remote MCP server for tests: Streamable HTTP (stateless) on 127.0.0.1, built with the MCP SDK's
 * own server, refusing every request that lacks its secret header (401). Tools: `echo {text}` and
 * `add {a, b}`. `requests` records each request's method, path, whether the header matched, and body.
 *
 *   const remote = await startRemoteMcpServer({ header: 'X-Api-Key', secret: 's3cret' });
 *   remote.url                                   // http://127.0.0.1:PORT/mcp
 */
import { createServer, type Server } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface RemoteMcpServer {
  url: string;
  requests: Array<{ method: string; authorized: boolean; body: string }>;
  close(): Promise<void>;
}

/** The test servers' MCP side: `echo` and `add` (test/support/oauth-mcp-server.ts serves the same behind OAuth). */
export function mcpServer(name = 'remote-test'): McpServer {
  const s = new McpServer({ name, version: '1.0.0' });
  s.registerTool('echo', { description: 'Echoes text', inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: 'text', text: `echo: ${text}` }],
  }));
  s.registerTool('add', { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({
    content: [{ type: 'text', text: String(a + b) }],
  }));
  return s;
}

export async function startRemoteMcpServer(o: { header: string; secret: string }): Promise<RemoteMcpServer> {
  const requests: RemoteMcpServer['requests'] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const authorized = req.headers[o.header.toLowerCase()] === o.secret;
    requests.push({ method: req.method ?? '', authorized, body });
    if (!authorized) {
      res.writeHead(401, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: `missing or wrong ${o.header}` }));
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    // Stateless: a server and transport per request, as the SDK's stateless example does.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    const s = mcpServer();
    res.on('close', () => {
      void transport.close();
      void s.close();
    });
    await s.connect(transport);
    await transport.handleRequest(req, res, body === '' ? undefined : JSON.parse(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    requests,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
