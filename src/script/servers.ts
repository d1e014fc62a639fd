/**
 * `servers.<id>.call(tool, args)` and `servers.<id>.listTools()` of one script, on the host side:
 * the catalog (remote servers the team registered; stdio servers of the workspace's `.mcp.json`),
 * the policy's decision per server and tool (`script.servers`), an audit row per call (server, tool,
 * a digest of the arguments — never the arguments or the server's headers —, duration, outcome),
 * and the connections, all closed when the script ends however it ends.
 */
import type { Client } from '@modelcontextprotocol/client';
import { MCP_JSON_FILE, MCP_JSON_MAX_BYTES, parseMcpJson, ServerRequest, type StdioServerEntry, type StoredRemoteServer } from '../contracts/mcp-servers.ts';
import { describeIssues } from '../contracts/errors.ts';
import { decideServerCall, mayListServer } from '../policy/servers.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { remoteServerRows } from '../dispatch/remote-servers-client.ts';
import type { AuditEntry } from '../store/audit.ts';
import type { HostAnswer } from './protocol.ts';
import type { SubprocessContext } from './subprocess.ts';
import { connectRemote, describe, oauthFailureOf } from './remote-server.ts';
import { OAUTH_CONNECT_SUBREQUESTS } from './remote-oauth-call.ts';
import { connectStdio } from './stdio-server.ts';
import type { StdioStop } from './job-stdio-transport.ts';
import { readWorkspaceFile } from './workspace-file.ts';

type CatalogEntry = { kind: 'remote'; row: StoredRemoteServer } | { kind: 'stdio'; entry: StdioServerEntry };
/** `stopped`: a stdio server the transport stopped (a line over its bound): why, for this call and the next. */
type Connection = {
  client: Client;
  secrets: () => string[];
  oauthFailure: () => { code: string; message: string } | undefined;
  stopped?: () => StdioStop | undefined;
};
/** The workspace's stdio servers, and why there are none when there are none. */
type StdioCatalog = { ok: true; servers: Map<string, CatalogEntry>; note: string };
type Failure = { ok: false; error: { code: string; message: string } };

/** Subrequests: the catalog read (one call to the team's object), a connection (initialize, initialized, the SSE GET), a call and its audit row. */
const CATALOG_SUBREQUESTS = 1;
const CONNECT_SUBREQUESTS = 3;
const CALL_SUBREQUESTS = 2;
/**
 * A stdio server goes through the team's object: its start (the policy, the submit: about 4) and its stop at the end
 * (the kill, and the wait for its job's end: 2) are the connect's, a call's audit row the call's; its messages (stdin
 * writes, waits for and reads of stdout) are charged as they are made, however many a long call or a long line takes
 * (stdio-server.ts).
 */
const STDIO_CONNECT_SUBREQUESTS = 4 + 2;
const STDIO_CALL_SUBREQUESTS = 1;
/** Reading `.mcp.json`: two governed jobs (stat, cat), each a policy read, a submit and its wait. */
const MCP_JSON_READ_SUBREQUESTS = 2 * 3;

export class ScriptServers {
  readonly #sc: SubprocessContext;
  #catalog: Promise<Map<string, CatalogEntry>> | undefined;
  #stdio: Promise<StdioCatalog | Failure> | undefined;
  /** Stdio servers this script has started (script.servers.maxServers). */
  #started = 0;
  readonly #connections = new Map<string, Promise<{ ok: true; conn: Connection } | Failure>>();
  #calls = 0;
  #closed = false;

  constructor(sc: SubprocessContext) {
    this.#sc = sc;
  }

  /** Calls made so far (each has its audit row). */
  get calls(): number {
    return this.#calls;
  }

  async handle(raw: unknown): Promise<HostAnswer<unknown>> {
    const parsed = ServerRequest.safeParse(raw);
    if (!parsed.success) return fail('invalid_argument', `servers: ${describeIssues(parsed.error.issues)}`);
    const req = parsed.data;
    const what = req.op === 'call' ? `servers.${req.server}.call` : `servers.${req.server}.listTools`;
    if (this.#closed) return fail('cancelled', `${what}: the script has ended`);
    const policy = this.#sc.script.servers;
    const found = await this.lookup(req.server);
    if ('ok' in found) return fail(found.error.code, `${what}: ${found.error.message}`);
    const entry = found.entry;
    if (!entry) {
      const { ids, note } = found;
      return fail(
        'not_found',
        `servers.${req.server}: not in the catalog — ${ids.length ? `it has ${ids.join(', ')}` : `the catalog is empty (${note || `no server in ${MCP_JSON_FILE}`}, no remote server registered for the team)`}`,
      );
    }
    const tool = req.op === 'call' ? req.tool : '(list tools)';
    const decision = req.op === 'call' ? decideServerCall(policy, req.server, req.tool) : mayListServer(policy, req.server);
    if (decision.decision !== 'allow') {
      const ask = decision.decision === 'ask';
      const message = ask
        ? `${what}: approval required by policy: ${decision.reason}; a script cannot wait for a person's approval — call this tool outside a script, or ask an admin to allow it in script.servers`
        : `${what}: denied by policy: ${decision.reason}`;
      if (this.#sc.slot.takeRefusalAudit()) await this.audit(req.server, tool, req, ask ? 'asked' : 'denied', message, 0);
      return fail(ask ? 'approval_required' : 'policy_denied', message);
    }
    const maxCalls = policy?.maxCalls ?? 0;
    if (this.#calls >= maxCalls)
      return fail('limit_reached', `${what}: limit reached — this script made ${this.#calls} server calls (script.servers.maxCalls = ${maxCalls})`);
    const stdio = entry.kind === 'stdio';
    const oauth = entry.kind === 'remote' && entry.row.auth === 'oauth' ? OAUTH_CONNECT_SUBREQUESTS : 0;
    const connect = this.#connections.has(req.server) ? 0 : stdio ? STDIO_CONNECT_SUBREQUESTS : CONNECT_SUBREQUESTS + oauth;
    const over = this.#sc.slot.beforeServerCall((stdio ? STDIO_CALL_SUBREQUESTS : CALL_SUBREQUESTS) + connect);
    if (over) return fail('limit_reached', `${what}: ${over}`);
    this.#calls++;
    const started = Date.now();
    const conn = await this.connect(req.server, entry);
    if (!conn.ok) {
      const message = named(what, conn.error);
      await this.audit(req.server, tool, req, 'failed', message, Date.now() - started);
      return fail(conn.error.code, message);
    }
    const timeout = policy?.callTimeoutMs;
    try {
      const value =
        req.op === 'call'
          ? await conn.conn.client.callTool({ name: req.tool, arguments: req.args }, { timeout })
          : {
              tools: (await conn.conn.client.listTools(undefined, { timeout })).tools.filter(
                (t) => decideServerCall(policy, req.server, t.name).decision !== 'deny',
              ),
            };
      const toolError = 'isError' in value && value.isError === true;
      await this.audit(
        req.server,
        tool,
        req,
        'allowed',
        toolError ? 'the tool answered with an error' : decision.reason,
        Date.now() - started,
        toolError ? 'tool_error' : 'success',
      );
      return { ok: true, value: JSON.parse(JSON.stringify(value)) };
    } catch (e) {
      const stop = conn.conn.stopped?.();
      // A connection whose OAuth refresh was refused says so in the reconnect message, whatever the transport threw.
      const oauthFailure = oauthFailureOf(e) ?? conn.conn.oauthFailure();
      const message = stop ? `${what}: ${stop.message}` : oauthFailure ? named(what, oauthFailure) : `${what}: ${describe(e, conn.conn.secrets())}`;
      await this.audit(req.server, tool, req, 'failed', message, Date.now() - started, 'failure');
      return fail(stop?.code ?? oauthFailure?.code ?? 'upstream_error', message);
    }
  }

  /** The script ended: close every connection it opened (and refuse what it still sends). */
  async close(): Promise<void> {
    this.#closed = true;
    const open = [...this.#connections.values()];
    this.#connections.clear();
    await Promise.all(
      open.map(async (c) => ((await c).ok ? ((await c) as { conn: Connection }).conn.client.close() : undefined)).map((p) => p.catch(() => undefined)),
    );
  }

  /**
   * Remote servers the team registered; an id that is not one of them is looked up in the workspace's `.mcp.json`
   * (read once, through the agent: workspace-file.ts), so a script calling only remote servers needs no agent.
   * A missing file (or no agent to read it) adds nothing; a malformed one fails the call naming the file and key.
   */
  private async lookup(id: string): Promise<{ entry: CatalogEntry | undefined; ids: string[]; note: string } | Failure> {
    const remote = await this.remoteCatalog();
    const hit = remote.get(id);
    if (hit) return { entry: hit, ids: [], note: '' };
    this.#stdio ??= this.stdioCatalog();
    const stdio = await this.#stdio;
    if (!stdio.ok) return stdio;
    const ids = [...new Set([...remote.keys(), ...stdio.servers.keys()])];
    return { entry: stdio.servers.get(id), ids, note: stdio.note };
  }

  private remoteCatalog(): Promise<Map<string, CatalogEntry>> {
    this.#catalog ??= (async () => {
      const m = new Map<string, CatalogEntry>();
      if (this.#sc.slot.beforeServerCall(CATALOG_SUBREQUESTS)) return m;
      for (const row of await remoteServerRows(this.#sc.ctx.env, this.#sc.ctx.principal.team)) m.set(row.id, { kind: 'remote', row });
      return m;
    })();
    return this.#catalog;
  }

  private async stdioCatalog(): Promise<StdioCatalog | Failure> {
    const servers = new Map<string, CatalogEntry>();
    const over = this.#sc.slot.beforeServerCall(MCP_JSON_READ_SUBREQUESTS);
    if (over) return fail('limit_reached', `${MCP_JSON_FILE} not read: ${over}`);
    const file = await readWorkspaceFile(this.#sc.ctx, this.#sc.extra, MCP_JSON_FILE, MCP_JSON_MAX_BYTES, this.#sc.scriptId, this.#sc.workspace);
    if (file.ok) {
      const parsed = parseMcpJson(file.text);
      if (!parsed.ok) return fail('invalid_argument', parsed.message);
      for (const [id, entry] of Object.entries(parsed.servers)) servers.set(id, { kind: 'stdio', entry });
      return { ok: true, servers, note: '' };
    }
    if (file.kind === 'missing') return { ok: true, servers, note: `no ${MCP_JSON_FILE} in the workspace` };
    if (file.kind === 'no_agent') return { ok: true, servers, note: `${MCP_JSON_FILE} not read: no agent of the team is connected` };
    return fail(file.kind === 'refused' ? 'policy_denied' : 'internal', file.message);
  }

  private connect(id: string, entry: CatalogEntry): Promise<{ ok: true; conn: Connection } | Failure> {
    let c = this.#connections.get(id);
    if (!c) {
      const timeoutMs = this.#sc.script.servers?.initializeTimeoutMs ?? 20_000;
      if (entry.kind === 'stdio') {
        const max = this.#sc.script.servers?.maxServers ?? 0;
        // Counted before the start is awaited: servers started at once each see the others.
        if (this.#started >= max)
          return Promise.resolve(
            fail('limit_reached', `limit reached — this script started ${this.#started} stdio servers (script.servers.maxServers = ${max})`),
          );
        this.#started++;
        c = connectStdio(this.#sc, id, entry.entry, timeoutMs).then((r) =>
          r.ok
            ? { ok: true as const, conn: { client: r.client, secrets: () => [], oauthFailure: () => undefined, stopped: r.stopped } }
            : fail(r.code, r.message),
        );
      } else {
        c = connectRemote(entry.row, this.#sc.ctx.principal.team, this.#sc.ctx.env, timeoutMs).then((r) =>
          r.ok ? { ok: true as const, conn: r } : { ok: false as const, error: { code: r.code, message: r.message } },
        );
      }
      this.#connections.set(id, c);
    }
    return c;
  }

  private async audit(
    server: string,
    tool: string,
    req: ServerRequest,
    decision: AuditEntry['decision'],
    reason: string,
    durationMs: number,
    exitStatus?: string,
  ) {
    const { ctx, scriptId } = this.#sc;
    const args = req.op === 'call' ? JSON.stringify(req.args) : '';
    await recordAudit(ctx.env, {
      team: ctx.principal.team,
      subject: ctx.principal.subject,
      tokenId: ctx.principal.tokenId,
      tool: 'run_script',
      command: { mode: 'server_call', server, tool, argsSha256: await sha256(args), argsBytes: new TextEncoder().encode(args).byteLength },
      decision,
      reason,
      parentJobId: scriptId,
      durationMs,
      ...(exitStatus ? { exitStatus } : {}),
    }).catch(() => null);
  }
}

/** A failure's message for the script: the OAuth ones name the server themselves (`servers.<id>: OAuth connection expired; …`). */
function named(what: string, f: { code: string; message: string }): string {
  return f.code.startsWith('oauth_') ? f.message : `${what}: ${f.message}`;
}

function fail(code: string, message: string): Failure {
  return { ok: false, error: { code, message } };
}

async function sha256(text: string): Promise<string> {
  const d = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, '0')).join('');
}
