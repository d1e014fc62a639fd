/** `gatehouse agents`: the team's executor agents (connected, sandbox, load, heartbeat, labels, runtimes). */
import { parseArgs, UsageError, formatFlags } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { field, text, when, type Row } from './fields.ts';
import { info, out, printJson, table } from './io.ts';

const AGENTS_HELP = `gatehouse agents — the team's executor agents

usage:
  gatehouse agents [--json]

flags:
${formatFlags({})}`;

function runtimes(v: unknown): string {
  if (!Array.isArray(v) || !v.length) return '-';
  return v.map((r) => (typeof r === 'string' ? r : text((r as Row).name))).join(',');
}

/** An agent's labels (what `sandbox.labels`/placement match on), comma-separated; none → "-". */
function labels(v: unknown): string {
  return Array.isArray(v) && v.length ? v.map((l) => text(l)).join(',') : '-';
}

export async function agentsCommand(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'agents');
  if (a.flags.help) return (out(AGENTS_HELP), 0);
  if (a.positionals.length || a.rest.length)
    throw new UsageError(`agents takes no arguments (got "${[...a.positionals, ...a.rest].join(' ')}"); see gatehouse agents --help`);
  const r = await api<{ agents: Row[] }>(connection(a.flags), 'GET', '/agents');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const agents = r.value.agents ?? [];
  if (!agents.length) return (info('no agents connected (start one with: gatehouse agent --url … --token-file … --root …)'), 0);
  const rows = agents.map((g) => {
    const connected = field(g, 'connected', 'online');
    const running = field(g, 'running', 'active', 'load', 'activeJobs', 'active_jobs');
    const capacity = field(g, 'capacity');
    return [
      text(field(g, 'id', 'agentId', 'agent_id')),
      connected === undefined ? '-' : connected ? 'connected' : 'gone',
      text(field(g, 'sandbox')),
      `${text(running)}/${text(capacity)}`,
      when(field(g, 'lastHeartbeat', 'last_heartbeat', 'lastSeen', 'last_seen', 'lastHeartbeatAt', 'last_heartbeat_at')),
      labels(field(g, 'labels')),
      runtimes(field(g, 'runtimes')),
    ];
  });
  out(table([['ID', 'STATE', 'SANDBOX', 'LOAD', 'LAST HEARTBEAT', 'LABELS', 'RUNTIMES'], ...rows]));
  return 0;
}
