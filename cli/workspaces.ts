/** `gatehouse workspaces list|rm`: the team's per-task workspaces (docs/workspaces.md). */
import { WORKSPACE_ID_RULE, WorkspaceId } from '../src/contracts/workspaces.ts';
import { formatFlags, parseArgs, UsageError } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { text, when, type Row } from './fields.ts';
import { info, out, printJson, table } from './io.ts';
import { visible } from './visible-text.ts';

const WORKSPACES_HELP = `gatehouse workspaces — the team's per-task workspaces (execute {"workspace": …} makes one)

usage:
  gatehouse workspaces list        every workspace: its agent, size, last use
  gatehouse workspaces rm <id>     delete a workspace and every file in it, on the agent that holds it`;

export async function workspacesCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'list':
    case 'ls':
      return list(rest);
    case 'rm':
      return rm(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(WORKSPACES_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown workspaces command "${visible(sub)}"; allowed: list, rm`);
  }
}

/** Bytes as a person reads them: 0 B, 512 B, 3.4 KiB, 12.0 MiB, 1.5 GiB. */
function humanBytes(v: unknown): string {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let n = v;
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${n.toFixed(1)} ${units[u]}`;
}

async function list(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'workspaces list');
  if (a.flags.help) return (out(`usage: gatehouse workspaces list\n\nflags:\n${formatFlags({})}`), 0);
  if (a.positionals.length || a.rest.length) throw new UsageError('workspaces list takes no arguments');
  const r = await api<{ workspaces: Row[] }>(connection(a.flags), 'GET', '/workspaces');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  if (!r.value.workspaces.length) return (info('no workspaces (a job run with "workspace" makes one)'), 0);
  out(
    table([
      ['ID', 'AGENT', 'SIZE', 'QUOTA', 'LAST USED', 'CREATED'],
      ...r.value.workspaces.map((w) => [
        text(w.id),
        `${text(w.agent_id)}${w.agent_connected === false ? ' (not connected)' : ''}`,
        humanBytes(w.bytes),
        humanBytes(w.quota_bytes),
        when(w.last_used_at),
        when(w.created_at),
      ]),
    ]),
  );
  return 0;
}

async function rm(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'workspaces rm');
  if (a.flags.help) return (out(`usage: gatehouse workspaces rm <id>\n\nflags:\n${formatFlags({})}`), 0);
  const xs = [...a.positionals, ...a.rest];
  if (xs.length !== 1) throw new UsageError('usage: gatehouse workspaces rm <id>');
  const id = xs[0]!;
  if (!WorkspaceId.safeParse(id).success) throw new UsageError(`workspace id "${visible(id)}" is not allowed: ${WORKSPACE_ID_RULE}`);
  const r = await api<Row>(connection(a.flags), 'DELETE', `/workspaces/${id}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`deleted workspace ${id} on agent ${text(r.value.agent_id)}`);
  return 0;
}
