/**
 * The Worker's side of the TeamDispatcher: start a job and read its NDJSON event stream,
 * cancel a job by its MCP call, list a team's agents. One DO per team, addressed by name.
 */
import type { Env } from '../env.ts';
import type { JobExit } from '../contracts/agent-protocol.ts';
import { err, ok, type Result } from '../contracts/errors.ts';
import { DispatchEvent, DO_PATHS, type AgentView, type DispatchRequest } from './events.ts';

function stub(env: Env, team: string) {
  return env.TEAM_DISPATCHER.get(env.TEAM_DISPATCHER.idFromName(team));
}

function doRequest(team: string, path: string, init: RequestInit = {}): Request {
  const headers = new Headers(init.headers);
  headers.set('X-Gatehouse-Team', team);
  return new Request(`https://team-dispatcher${path}`, { ...init, headers });
}

/** Forwards an (already authenticated) agent WebSocket upgrade to the team's DO. */
export function connectAgent(env: Env, team: string, subject: string, upgrade: Request): Promise<Response> {
  const headers = new Headers({ Upgrade: 'websocket', 'X-Gatehouse-Subject': subject });
  return stub(env, team).fetch(doRequest(team, DO_PATHS.connect, { headers }));
}

export interface DispatchOutcome {
  exit: JobExit;
  agentId: string;
}

/**
 * Runs a job through the team's DO. `onEvent` sees queued/started/output events as they arrive
 * (the MCP tools turn output into progress notifications). Errors (no agent, busy, refused by
 * the agent) come back as values with the DO's code and message.
 */
export async function dispatchJob(
  env: Env,
  team: string,
  req: DispatchRequest,
  onEvent: (e: DispatchEvent) => void | Promise<void>,
): Promise<Result<DispatchOutcome>> {
  const res = await stub(env, team).fetch(
    doRequest(team, DO_PATHS.run, { method: 'POST', body: JSON.stringify(req), headers: { 'Content-Type': 'application/json' } }),
  );
  if (!res.ok || !res.body) {
    const body = (await res.json().catch(() => null)) as { error?: { code: string; message: string } } | null;
    return err('internal', body?.error?.message ?? `dispatcher answered HTTP ${res.status}`);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buffered += value;
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!line) continue;
      const parsed = DispatchEvent.safeParse(JSON.parse(line));
      if (!parsed.success) continue;
      const e = parsed.data;
      if (e.type === 'exit') {
        void reader.cancel().catch(() => {});
        return ok({ exit: e.exit, agentId: e.agentId });
      }
      if (e.type === 'error') {
        void reader.cancel().catch(() => {});
        return err(errorCode(e.code), e.message);
      }
      await onEvent(e);
    }
    if (done) return err('internal', 'the dispatcher closed the stream without a result');
  }
}

function errorCode(code: string) {
  switch (code) {
    case 'no_agent':
    case 'concurrency_limit':
    case 'runtime_unavailable':
    case 'policy_denied':
    case 'spawn_failed':
    case 'invalid_argument':
      return code;
    case 'cancelled':
      return 'cancelled' as const;
    default:
      return 'upstream_error' as const;
  }
}

export async function cancelByCall(env: Env, team: string, cancelKey: string, reason: string): Promise<boolean> {
  const res = await stub(env, team).fetch(
    doRequest(team, DO_PATHS.cancel, { method: 'POST', body: JSON.stringify({ cancelKey, reason }) }),
  );
  const body = (await res.json()) as { cancelled: boolean };
  return body.cancelled;
}

export async function listAgents(env: Env, team: string): Promise<AgentView[]> {
  const res = await stub(env, team).fetch(doRequest(team, DO_PATHS.agents));
  return ((await res.json()) as { agents: AgentView[] }).agents;
}
