/** `gatehouse jobs list|show|kill`: the team's jobs through the admin API. */
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { duration, field, text, when, type Row } from './fields.ts';
import { info, out, printJson, table } from './io.ts';
import { formatCommand } from './visible-text.ts';

const LIST_FLAGS: FlagSpecs = {
  limit: { type: 'string', value: 'N', help: "how many jobs (default: the gateway's, 50; at most 200)" },
  state: { type: 'string', value: 'state', help: 'only jobs in this state (queued, running, exited, …)' },
  subject: { type: 'string', value: 'sub', help: 'only jobs started by this token subject' },
  tool: { type: 'string', value: 'tool', help: 'only jobs of this tool (execute, runtime_execute, …)' },
  cursor: { type: 'string', value: 'cursor', help: 'continue after a previous page (printed as "next page: …")' },
};

const JOBS_HELP = `gatehouse jobs — the team's jobs

usage:
  gatehouse jobs list [--state running] [--subject s] [--tool t] [--limit N] [--cursor c]   newest first
  gatehouse jobs show <job id>                                     one job: command, state, exit, timing, network connections
  gatehouse jobs kill <job id>                                     stop a queued or running job

flags (list):
${formatFlags(LIST_FLAGS)}`;

const help = (usage: string, specs: FlagSpecs) => out(`${usage}\n\nflags:\n${formatFlags(specs)}`);

export async function jobsCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'list':
      return list(rest);
    case 'show':
      return show(rest);
    case 'kill':
      return kill(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(JOBS_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown jobs command "${sub}"; allowed: list, show, kill`);
  }
}

const jobId = (j: Row) => text(field(j, 'id', 'jobId', 'job_id'));
/** What ran: the admin API keeps it on the job's call (its audit row), not on the job row itself. */
const commandOf = (j: Row): unknown => field(j, 'command', 'spec') ?? field((field(j, 'call') ?? {}) as Row, 'command');
const command = (j: Row) => formatCommand(commandOf(j)) || '-';
const exit = (j: Row) => {
  const code = field(j, 'exitCode', 'exit_code');
  const signal = field(j, 'signal');
  return code !== undefined ? text(code) : signal !== undefined ? text(signal) : '-';
};

async function list(argv: string[]): Promise<number> {
  const a = parseArgs(argv, LIST_FLAGS, 'jobs list');
  if (a.flags.help) return (help('usage: gatehouse jobs list [--limit N] [--state s] [--cursor c]', LIST_FLAGS), 0);
  if (a.positionals.length || a.rest.length) throw new UsageError('jobs list takes no positional arguments');
  const q = new URLSearchParams();
  if (a.flags.limit !== undefined) {
    const n = Number(a.flags.limit);
    if (!Number.isInteger(n) || n < 1 || n > 200) throw new UsageError(`--limit "${a.flags.limit}" must be an integer from 1 to 200`);
    q.set('limit', String(n));
  }
  for (const k of ['state', 'subject', 'tool'] as const) if (a.flags[k] !== undefined) q.set(k, String(a.flags[k]));
  if (a.flags.cursor !== undefined) q.set('cursor', String(a.flags.cursor));
  const r = await api<{ jobs: Row[]; next_cursor?: string | null; nextCursor?: string | null }>(connection(a.flags), 'GET', `/jobs${q.size ? `?${q}` : ''}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const jobs = r.value.jobs ?? [];
  if (!jobs.length) info('no jobs');
  else {
    // The command column only when the gateway's rows carry one.
    const withCommand = jobs.some((j) => commandOf(j) !== undefined);
    const rows = jobs.map((j) => [
      jobId(j),
      text(field(j, 'state')),
      text(field(j, 'tool')),
      text(field(j, 'subject')),
      when(field(j, 'createdAt', 'created_at')),
      duration(field(j, 'durationMs', 'duration_ms')),
      exit(j),
      ...(withCommand ? [command(j)] : []),
    ]);
    out(table([['ID', 'STATE', 'TOOL', 'SUBJECT', 'CREATED', 'DURATION', 'EXIT', ...(withCommand ? ['COMMAND'] : [])], ...rows]));
  }
  const next = r.value.next_cursor ?? r.value.nextCursor;
  if (next) info(`next page: gatehouse jobs list --cursor ${next}`);
  return 0;
}

function oneId(a: { positionals: string[]; rest: string[] }, verb: string): string {
  const ids = [...a.positionals, ...a.rest];
  if (ids.length !== 1) throw new UsageError(`usage: gatehouse jobs ${verb} <job id> (exactly one id; see gatehouse jobs list)`);
  return ids[0];
}

async function show(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'jobs show');
  if (a.flags.help) return (help('usage: gatehouse jobs show <job id>', {}), 0);
  const id = oneId(a, 'show');
  const r = await api<Row & { job?: Row }>(connection(a.flags), 'GET', `/jobs/${encodeURIComponent(id)}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const j = (r.value.job ?? r.value) as Row;
  const lines: [string, string][] = [
    ['job', jobId(j)],
    ['state', text(field(j, 'state'))],
    ['tool', text(field(j, 'tool'))],
    ['subject', text(field(j, 'subject'))],
    ['command', command(j)],
    ['cwd', text(field((field(j, 'call') ?? {}) as Row, 'cwd'))],
    ['agent', text(field(j, 'agent', 'agentId', 'agent_id'))],
    ['sandbox', text(field(j, 'sandbox'))],
    ['created', when(field(j, 'createdAt', 'created_at'))],
    ['started', when(field(j, 'startedAt', 'started_at'))],
    ['ended', when(field(j, 'endedAt', 'ended_at'))],
    ['duration', duration(field(j, 'durationMs', 'duration_ms'))],
    ['exit', exit(j)],
    ['artifact', text(field(j, 'artifactHandle', 'artifact_handle'))],
  ];
  const error = field(j, 'error');
  if (error !== undefined) lines.push(['error', text(error)]);
  const network = field(j, 'network') as Row | undefined;
  if (network) lines.push(['network', networkLine(network)]);
  out(lines.map(([k, v]) => `${`${k}:`.padEnd(10)}${v}`).join('\n'));
  const conns = Array.isArray(network?.connections) ? (network.connections as Row[]) : [];
  if (conns.length) {
    out('');
    out(
      table([
        ['HOST', 'METHOD', 'DECISION', 'UP', 'DOWN', 'TIME', 'REASON'],
        ...conns.map((c) => [
          `${text(field(c, 'host'))}:${text(field(c, 'port'))}`,
          text(field(c, 'method')),
          text(field(c, 'decision')),
          text(field(c, 'bytes_up')),
          text(field(c, 'bytes_down')),
          duration(field(c, 'ms')),
          text(field(c, 'reason')),
        ]),
      ]),
    );
  }
  return 0;
}

/** The job's network grant and its connections in one line: `allowlist (network): 3 allowed, 1 refused`. */
function networkLine(n: Row): string {
  const counts = `${text(field(n, 'allowed'))} allowed, ${text(field(n, 'refused'))} refused`;
  const dropped = Number(field(n, 'dropped') ?? 0);
  return `${text(field(n, 'mode'))} (${text(field(n, 'source'))}): ${counts}${dropped ? `, ${dropped} more not listed` : ''}`;
}

async function kill(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'jobs kill');
  if (a.flags.help) return (help('usage: gatehouse jobs kill <job id>', {}), 0);
  const id = oneId(a, 'kill');
  const r = await api<Row & { job?: Row }>(connection(a.flags), 'POST', `/jobs/${encodeURIComponent(id)}/kill`, {});
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const j = (r.value.job ?? r.value) as Row;
  const state = field(j, 'state');
  out(`kill sent to job ${id}${state !== undefined ? ` (state: ${text(state)})` : ''}`);
  return 0;
}
