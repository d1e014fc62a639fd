/**
 * A script's stdio MCP server (from the workspace's `.mcp.json`): started on the script's first call to it as a
 * governed long-running job on the team's agent — the team policy decides its command like any job's, it is
 * audited (its row links to the script's) and limited — and spoken to with the official MCP client over the job's
 * stdin/stdout (job-stdio-transport.ts). Closing the client kills the job.
 *
 * Such a job is a script's server, not a client's interactive session: it does not need `interactive.enabled`
 * (nothing but this script's MCP client writes to its stdin), and it never takes one of the team's job slots
 * (an interactive job has its own budget, scheduler.ts); the script's own cap is `script.servers.maxServers`.
 */
import { Client } from '@modelcontextprotocol/client';
import type { StdioServerEntry } from '../contracts/mcp-servers.ts';
import { jobStatus, killJob } from '../dispatch/client.ts';
import { waitJobOutput, writeJobStdin } from '../dispatch/interactive-client.ts';
import { readJobOutput } from '../dispatch/job-output.ts';
import { isTerminal } from '../contracts/job-view.ts';
import { runGoverned } from '../governed/governed-run.ts';
import { JobStdioTransport, StdioStopError, type JobStdio, type StdioStop } from './job-stdio-transport.ts';
import type { SubprocessContext } from './subprocess.ts';

/** `stopped`: why the transport stopped the server, once it has (the SDK tells the waiting call only "Connection closed"). */
type StdioOpen = { ok: true; client: Client; jobId: string; stopped: () => StdioStop | undefined } | { ok: false; code: string; message: string };

/** Starts the server's job and connects (initialize) within `timeoutMs`; a server that does not answer is killed. */
export async function connectStdio(sc: SubprocessContext, id: string, entry: StdioServerEntry, timeoutMs: number): Promise<StdioOpen> {
  const { ctx } = sc;
  const out = await runGoverned(ctx, sc.extra, {
    tool: 'run_script',
    parentJobId: sc.scriptId,
    policy: { mode: 'argv', command: entry.command, args: entry.args, env: entry.env },
    job: { mode: 'argv', command: entry.command, args: entry.args },
    ...(sc.workspace ? { workspace: sc.workspace } : {}),
    // Answered once accepted: the server runs on while the script talks to it.
    background: true,
    interactive: {},
    scriptServer: true,
  });
  if (out.kind === 'denied')
    return { ok: false, code: 'policy_denied', message: `could not start '${entry.command}': denied by policy: ${out.decision.reason}` };
  if (out.kind === 'error') {
    // The sessions' budget is shared with clients' interactive jobs: say that a script's server is one of them.
    const shared =
      out.error.code === 'session_limit' ? "; each stdio server a script runs is one of the team's interactive sessions until the script ends" : '';
    return { ok: false, code: out.error.code, message: `could not start '${entry.command}': ${out.error.message}${shared}` };
  }
  if (out.kind !== 'accepted')
    return {
      ok: false,
      code: 'approval_required',
      message: `could not start '${entry.command}': the policy asks for approval, which a script cannot wait for`,
    };
  const jobId = out.jobId;
  const client = new Client({ name: 'gatehouse-script', version: '1' }, { capabilities: {} });
  const transport = new JobStdioTransport(jobStdio(sc, id, jobId));
  try {
    await client.connect(transport, { timeout: timeoutMs });
    return { ok: true, client, jobId, stopped: () => transport.stopped };
  } catch (e) {
    // close() kills the job: a server that never answered initialize does not linger.
    await client.close().catch(() => undefined);
    const stop = transport.stopped;
    if (stop) return { ok: false, code: stop.code, message: stop.message };
    const why = e instanceof Error ? e.message : String(e);
    return {
      ok: false,
      code: 'upstream_error',
      message: `could not connect to stdio server ${id} ('${entry.command}', job ${jobId}): ${why} (script.servers.initializeTimeoutMs = ${timeoutMs}); the server was stopped`,
    };
  }
}

/**
 * Subrequests each of the transport's calls to the team's object makes: a stdin write, a wait for stdout, and a read
 * (the job's status, then its live output — or, once the output is an artifact, its index row and an R2 read).
 */
const STDIO_IO_SUBREQUESTS = { write: 1, wait: 1, read: 3 } as const;

/** How long stopping a server waits for its job to end: a kill ends it within the agent's grace (0.5 s), and then some. */
const STDIO_END_WAIT_MS = 5_000;

/**
 * The server's job as its transport uses it. Every call to the team's object is a subrequest of the script's
 * request, however long the server runs or however long its lines are (a 4 MiB line is 16 reads): each is charged
 * when it is made (request-budget.ts), and one that does not fit stops the server with the limit's message.
 * Stopping it at the end is in the connect's own charge, so it is never refused.
 */
function jobStdio(sc: SubprocessContext, id: string, jobId: string): JobStdio {
  const { env, principal } = sc.ctx;
  const team = principal.team;
  const charge = (n: number) => {
    const over = sc.slot.beforeServerCall(n);
    if (over) throw new StdioStopError({ code: 'limit_reached', message: `stdio server ${id}: ${over}; it was stopped` });
  };
  return {
    async write(data) {
      charge(STDIO_IO_SUBREQUESTS.write);
      const a = await writeJobStdin(env, team, jobId, principal.subject, data);
      return a.ok ? { ok: true } : { ok: false, message: `${a.code}: ${a.message}` };
    },
    async wait(offset, waitMs) {
      charge(STDIO_IO_SUBREQUESTS.wait);
      const r = await waitJobOutput(env, team, { jobId, stream: 'stdout', offset, waitMs }, principal.subject);
      return { ended: r.waited === 'ended' };
    },
    async read(offset, max) {
      charge(STDIO_IO_SUBREQUESTS.read);
      const view = await jobStatus(env, team, jobId);
      if (!view) return { data: new Uint8Array(0), nextOffset: offset, done: true };
      const page = await readJobOutput(env, team, view, 'stdout', offset, max);
      if ('expired' in page) return { data: new Uint8Array(0), nextOffset: offset, done: true };
      return { data: page.data, nextOffset: page.nextOffset, done: page.eof || (isTerminal(view.state) && page.data.byteLength === 0) };
    },
    async kill(reason) {
      await killJob(env, team, jobId, reason);
      // Its session counts against the team's interactive.maxSessions until the agent reports the job's end: wait
      // for that (one wait past any output there will be), so a script started right after this one is not refused
      // `session_limit` for servers already stopped. A kill ends a job within its grace; past the wait it goes on.
      await waitJobOutput(env, team, { jobId, stream: 'stdout', offset: Number.MAX_SAFE_INTEGER, waitMs: STDIO_END_WAIT_MS }, principal.subject);
    },
  };
}
