/**
 * Smoke test of a deployed gateway: run after every deploy, by CI (.github/workflows/deploy.yml) and by hand
 * (docs/deploy.md). It checks what a client needs first, in order:
 *
 *   1. GET /healthz answers 200 (the Worker runs);
 *   2. GET /readyz answers 200 (its configuration and storage are usable);
 *   3. an MCP `initialize` with the token is answered by the server `gatehouse` (auth, Host and issuer/audience agree);
 *   4. `tools/list` lists `execute`.
 *
 * ```sh
 * GATEHOUSE_SMOKE_TOKEN=… node scripts/smoke.ts --url https://gatehouse-staging.example.com [--timeout 90]
 * ```
 *
 * The token comes from the environment only (the command line shows in `ps` and in CI logs). Any token the
 * gateway accepts on /mcp will do; docs/deploy.md mints one that can only read artifacts of a team of its own.
 * A new version takes a few seconds to reach every Cloudflare location, so a failing check is retried until
 * --timeout; a refused token (401/403) is not, since waiting does not change it. Exit 0 when every check passes,
 * 1 naming the failing check, 2 on a usage error.
 */
import { parseArgs } from 'node:util';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const USAGE = 'usage: GATEHOUSE_SMOKE_TOKEN=<token> node scripts/smoke.ts --url <gateway URL> [--timeout <seconds>]';

/** A check that failed in a way waiting will not fix. */
class FinalFailure extends Error {}

interface Options {
  base: URL;
  token: string;
  deadline: number;
}

function options(argv: string[]): Options | string {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (e) {
    return (e as Error).message;
  }
  const { url, timeout, help } = parsed.values;
  if (help) return '';
  if (!url) return '--url is required';
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    return `--url "${url}" is not a URL`;
  }
  if (base.protocol !== 'https:' && base.protocol !== 'http:') return `--url "${url}" is not an http(s) URL`;
  const seconds = Number(timeout ?? '90');
  if (!Number.isFinite(seconds) || seconds <= 0) return `--timeout "${timeout}" is not a positive number of seconds`;
  const token = process.env.GATEHOUSE_SMOKE_TOKEN?.trim();
  if (!token) return 'GATEHOUSE_SMOKE_TOKEN is not set (a token the gateway accepts on /mcp; never pass it on the command line)';
  return { base, token, deadline: Date.now() + seconds * 1000 };
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    options: { url: { type: 'string' }, timeout: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
    allowPositionals: false,
  });
}

/** A network failure's own words: undici's "fetch failed" hides them in `cause` (ECONNREFUSED, ENOTFOUND, …). */
function reason(e: unknown): string {
  const err = e as Error & { cause?: { code?: string; message?: string } };
  return err.cause ? `${err.message} (${err.cause.code ?? err.cause.message})` : err.message;
}

/** `path` resolved against the gateway's origin (a --url with a path or trailing slash still means the gateway). */
const at = (o: Options, path: string) => new URL(path, o.base.origin);

/** Runs `check` until it passes, fails finally, or the deadline passes; the last failure is the one reported. */
async function retry<T>(o: Options, check: () => Promise<T>): Promise<T> {
  for (let wait = 1000; ; wait = Math.min(wait * 2, 8000)) {
    try {
      return await check();
    } catch (e) {
      if (e instanceof FinalFailure || Date.now() + wait > o.deadline) throw e;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

async function expectOk(o: Options, path: string): Promise<string> {
  return retry(o, async () => {
    const started = Date.now();
    const r = await fetch(at(o, path), { redirect: 'manual', signal: AbortSignal.timeout(10_000) }).catch((e: unknown) => {
      throw new Error(`GET ${at(o, path)}: ${reason(e)}`);
    });
    const body = (await r.text()).slice(0, 300);
    if (r.status !== 200) throw new Error(`GET ${path} answered ${r.status}, not 200: ${body}`);
    return `GET ${path} 200 (${Date.now() - started} ms)`;
  });
}

/** The MCP handshake and tools/list through the official client, remembering the last refused HTTP answer. */
async function mcp(o: Options): Promise<string[]> {
  return retry(o, async () => {
    let refused: { status: number; body: string } | undefined;
    const recording = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const r = await fetch(input, { ...init, signal: init?.signal ?? AbortSignal.timeout(15_000) });
      if (!r.ok) refused = { status: r.status, body: (await r.clone().text()).slice(0, 300) };
      return r;
    };
    const client = new Client({ name: 'gatehouse-smoke', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(at(o, '/mcp'), {
      requestInit: { headers: { Authorization: `Bearer ${o.token}` } },
      fetch: recording,
    });
    try {
      const started = Date.now();
      await client.connect(transport);
      const server = client.getServerVersion();
      if (server?.name !== 'gatehouse') throw new FinalFailure(`initialize: the server is "${server?.name}", not gatehouse`);
      const lines = [`MCP initialize: ${server.name} ${server.version} (${Date.now() - started} ms)`];
      const listed = Date.now();
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      if (!names.includes('execute')) throw new FinalFailure(`tools/list has no "execute" tool (got: ${names.join(', ') || 'none'})`);
      lines.push(`MCP tools/list: ${names.length} tools (${Date.now() - listed} ms)`);
      return lines;
    } catch (e) {
      if (e instanceof FinalFailure) throw e;
      if (refused && (refused.status === 401 || refused.status === 403)) {
        throw new FinalFailure(
          `the gateway refused GATEHOUSE_SMOKE_TOKEN on /mcp (HTTP ${refused.status}): ${refused.body}\n` +
            'mint a new one for this gateway (docs/deploy.md) — its issuer, audience and signing key must be this deployment’s',
        );
      }
      throw new Error(`MCP on ${at(o, '/mcp')}: ${reason(e)}${refused ? ` (last refusal: HTTP ${refused.status} ${refused.body})` : ''}`);
    } finally {
      await client.close().catch(() => {});
    }
  });
}

async function main(argv: string[]): Promise<number> {
  const o = options(argv);
  if (typeof o === 'string') {
    console.error(o ? `smoke: ${o}\n${USAGE}` : USAGE);
    return o ? 2 : 0;
  }
  console.log(`smoke test of ${o.base.origin}`);
  try {
    console.log(`ok  ${await expectOk(o, '/healthz')}`);
    console.log(`ok  ${await expectOk(o, '/readyz')}`);
    for (const line of await mcp(o)) console.log(`ok  ${line}`);
  } catch (e) {
    console.error(`FAIL ${(e as Error).message}`);
    return 1;
  }
  console.log('smoke test passed');
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
