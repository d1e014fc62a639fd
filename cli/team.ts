/**
 * `gatehouse team create|list|show|suspend|resume|quotas|delete|usage`: the deployment's teams, for its
 * operators (the gateway's /operator/v1/, docs/teams.md). They take an operator token
 * (--token or $GATEHOUSE_OPERATOR_TOKEN), minted offline: gatehouse token bootstrap --scope operator.
 */
import { parseArgs, UsageError, formatFlags, GLOBAL_FLAGS, type FlagSpecs } from './args.ts';
import { formatError, type ApiResult } from './client.ts';
import { info, iso, out, printJson, table } from './io.ts';

const TEAM_HELP = `gatehouse team — the deployment's teams, for its operators (an operator token)

usage:
  gatehouse team create <id> [--note text] [--jobs-per-day N] [--storage-bytes N]
  gatehouse team list [--status active|suspended]
  gatehouse team show <id>                         status, quotas and usage
  gatehouse team suspend <id> --reason text        every call and agent of the team refused; data kept
  gatehouse team resume <id>
  gatehouse team quotas <id> [--jobs-per-day N] [--storage-bytes N]   sets them (none given: no quotas)
  gatehouse team usage <id>                        calls, jobs, job-seconds, egress today and this month
  gatehouse team delete <id> --confirm <id>        a suspended team: exported, then everything removed

An operator token is minted offline with the signing key (gatehouse token bootstrap --scope operator
--team ops ...) and given with --token or $GATEHOUSE_OPERATOR_TOKEN. A team's admins see their own
usage with the admin API (GET /admin/v1/usage).`;

const CONN: FlagSpecs = {
  url: GLOBAL_FLAGS.url,
  token: { type: 'string', value: 'JWT', help: 'operator token (default: $GATEHOUSE_OPERATOR_TOKEN)' },
  json: GLOBAL_FLAGS.json,
  help: GLOBAL_FLAGS.help,
};
const QUOTA_FLAGS: FlagSpecs = {
  'jobs-per-day': { type: 'string', value: 'N', help: 'jobs a day (UTC) the team may submit' },
  'storage-bytes': { type: 'string', value: 'N', help: "bytes the team's object may hold before new jobs are refused" },
};

interface Team {
  id: string;
  status: string;
  createdAt: number;
  createdBy: string | null;
  note: string | null;
  suspended: { at: number; by: string; reason: string } | null;
  quotas: { jobsPerDay?: number; storageBytes?: number };
}
interface Figures {
  calls: number;
  jobs: number;
  jobSeconds: number;
  egressBytes: number;
}
interface Usage {
  day: string;
  month: string;
  today: Figures;
  thisMonth: Figures;
  storageBytes: number;
  quotas: Team['quotas'];
}

const SUBCOMMANDS = ['create', 'list', 'show', 'suspend', 'resume', 'quotas', 'usage', 'delete'];

export async function teamCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'create':
      return run(
        rest,
        'create',
        '<id> [--note text] [--jobs-per-day N] [--storage-bytes N]',
        { note: { type: 'string', value: 'text', help: 'shown by team list' }, ...QUOTA_FLAGS },
        create,
      );
    case 'list':
      return run(rest, 'list', '[--status active|suspended]', { status: { type: 'string', value: 'status', help: 'only teams with this status' } }, list, 0);
    case 'show':
      return run(rest, 'show', '<id>', {}, show);
    case 'suspend':
      return run(
        rest,
        'suspend',
        '<id> --reason text',
        { reason: { type: 'string', value: 'text', help: 'why (shown to the team on every refused call)' } },
        suspend,
      );
    case 'resume':
      return run(rest, 'resume', '<id>', {}, (conn, id) => withTeam(api(conn, 'POST', `/teams/${enc(id)}/resume`, {}), conn));
    case 'quotas':
      return run(rest, 'quotas', '<id> [--jobs-per-day N] [--storage-bytes N]', QUOTA_FLAGS, (conn, id, f) =>
        withTeam(api(conn, 'PUT', `/teams/${enc(id)}/quotas`, quotasOf(f)), conn),
      );
    case 'usage':
      return run(rest, 'usage', '<id>', {}, usage);
    case 'delete':
      return run(rest, 'delete', '<id> --confirm <id>', { confirm: { type: 'string', value: 'id', help: 'the id again: deleting cannot be undone' } }, remove);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(TEAM_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown team command "${sub}"; allowed: ${SUBCOMMANDS.join(', ')}`);
  }
}

interface Conn {
  url: string;
  token: string;
  json: boolean;
}
type Flags = Record<string, unknown>;
type Action = (conn: Conn, id: string, flags: Flags) => Promise<number>;

const enc = encodeURIComponent;

async function run(argv: string[], sub: string, usage: string, specs: FlagSpecs, action: Action, positionals = 1): Promise<number> {
  const a = parseArgs(argv, { ...specs, ...CONN }, `team ${sub}`, false);
  if (a.flags.help) return (out(`usage: gatehouse team ${sub} ${usage}\n\nflags:\n${formatFlags({ ...specs, ...CONN }, false)}`), 0);
  const args = [...a.positionals, ...a.rest];
  if (args.length !== positionals) throw new UsageError(`usage: gatehouse team ${sub} ${usage}`);
  const url = (a.flags.url as string | undefined) ?? process.env.GATEHOUSE_URL;
  const token = (a.flags.token as string | undefined) ?? process.env.GATEHOUSE_OPERATOR_TOKEN;
  if (!url) throw new UsageError('no gateway URL: pass --url or set GATEHOUSE_URL');
  if (!token) throw new UsageError('no operator token: pass --token or set GATEHOUSE_OPERATOR_TOKEN (gatehouse token bootstrap --scope operator mints one)');
  let base: string;
  try {
    base = new URL(url).href.replace(/\/+$/, '').replace(/\/mcp$/, '');
  } catch {
    throw new UsageError(`--url "${url}" is not a URL`);
  }
  return action({ url: base, token: token.trim(), json: a.flags.json === true }, args[0] ?? '', a.flags);
}

/** One request to the operator API; errors as values, like the admin client's (cli/client.ts). */
async function api<T>(conn: Conn, method: string, path: string, body?: unknown): Promise<ApiResult<T>> {
  let res: Response;
  try {
    res = await fetch(`${conn.url}/operator/v1${path}`, {
      method,
      headers: { Authorization: `Bearer ${conn.token}`, Accept: 'application/json', ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(120_000),
    });
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause;
    return { ok: false, error: { status: 0, code: 'unreachable', message: `cannot reach ${conn.url}: ${cause?.code ?? (e as Error).message}` } };
  }
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    return { ok: false, error: { status: res.status, code: 'bad_response', message: `the gateway answered non-JSON: ${text.slice(0, 200)}` } };
  }
  if (!res.ok) {
    const err = (json as { error?: { code?: string; message?: string } } | null)?.error;
    return { ok: false, error: { status: res.status, code: err?.code ?? `http_${res.status}`, message: err?.message ?? res.statusText } };
  }
  return { ok: true, value: json as T };
}

function count(flag: string, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${flag} "${v}" is not a whole number`);
  return n;
}

function quotasOf(f: Flags): Team['quotas'] {
  const jobsPerDay = count('jobs-per-day', f['jobs-per-day']);
  const storageBytes = count('storage-bytes', f['storage-bytes']);
  return { ...(jobsPerDay !== undefined ? { jobsPerDay } : {}), ...(storageBytes !== undefined ? { storageBytes } : {}) };
}

const describeQuotas = (q: Team['quotas']) =>
  [q.jobsPerDay !== undefined ? `${q.jobsPerDay} jobs/day` : '', q.storageBytes !== undefined ? `${q.storageBytes} bytes` : ''].filter(Boolean).join(', ') ||
  'none';

function printTeam(t: Team): void {
  out(
    table([
      ['team', t.id],
      ['status', t.suspended ? `suspended ${iso(t.suspended.at)} by ${t.suspended.by}: ${t.suspended.reason}` : t.status],
      ['created', `${iso(t.createdAt)}${t.createdBy ? ` by ${t.createdBy}` : ' (implicitly)'}`],
      ['note', t.note ?? ''],
      ['quotas', describeQuotas(t.quotas)],
    ]),
  );
}

function printUsage(u: Usage): void {
  const row = (label: string, f: Figures) => [label, String(f.calls), String(f.jobs), String(f.jobSeconds), String(f.egressBytes)];
  out(table([['', 'CALLS', 'JOBS', 'JOB-SECONDS', 'EGRESS BYTES'], row(`today (${u.day})`, u.today), row(`this month (${u.month})`, u.thisMonth)]));
  out(`storage: ${u.storageBytes} bytes; quotas: ${describeQuotas(u.quotas)}`);
}

async function withTeam(p: Promise<ApiResult<{ team: Team }>>, conn: Conn): Promise<number> {
  const r = await p;
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (conn.json) return (printJson(r.value), 0);
  printTeam(r.value.team);
  return 0;
}

const create: Action = (conn, id, f) => {
  const quotas = quotasOf(f);
  return withTeam(
    api(conn, 'POST', '/teams', { id, ...(f.note !== undefined ? { note: f.note } : {}), ...(Object.keys(quotas).length ? { quotas } : {}) }),
    conn,
  );
};

const suspend: Action = (conn, id, f) => {
  if (typeof f.reason !== 'string' || !f.reason.trim()) throw new UsageError('--reason is required: the team sees it on every refused call');
  return withTeam(api(conn, 'POST', `/teams/${enc(id)}/suspend`, { reason: f.reason }), conn);
};

const list: Action = async (conn, _id, f) => {
  const teams: Team[] = [];
  let after: string | null = '';
  while (after !== null) {
    const q: URLSearchParams = new URLSearchParams({ limit: '500', ...(after ? { after } : {}), ...(f.status ? { status: String(f.status) } : {}) });
    const r: ApiResult<{ teams: Team[]; next: string | null }> = await api(conn, 'GET', `/teams?${q}`);
    if (!r.ok) return (info(formatError(r.error)), 1);
    teams.push(...r.value.teams);
    after = r.value.next;
  }
  if (conn.json) return (printJson({ teams }), 0);
  if (!teams.length) return (info('no teams'), 0);
  out(
    table([
      ['TEAM', 'STATUS', 'CREATED', 'BY', 'QUOTAS', 'NOTE'],
      ...teams.map((t) => [t.id, t.status, iso(t.createdAt), t.createdBy ?? '(implicit)', describeQuotas(t.quotas), t.note ?? '']),
    ]),
  );
  return 0;
};

const show: Action = async (conn, id) => {
  const r = await api<{ team: Team; usage: Usage | null; usageError?: string }>(conn, 'GET', `/teams/${enc(id)}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (conn.json) return (printJson(r.value), 0);
  printTeam(r.value.team);
  if (r.value.usage) printUsage(r.value.usage);
  else info(`usage unavailable: ${r.value.usageError ?? 'unknown'}`);
  return 0;
};

const usage: Action = async (conn, id) => {
  const r = await api<{ team: string; usage: Usage }>(conn, 'GET', `/teams/${enc(id)}/usage`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (conn.json) return (printJson(r.value), 0);
  printUsage(r.value.usage);
  return 0;
};

const remove: Action = async (conn, id, f) => {
  if (f.confirm !== id) throw new UsageError(`deleting team "${id}" needs --confirm ${id}: it removes the team's data for good (after exporting it)`);
  for (;;) {
    const r = await api<{ complete: boolean; export: { directory: { key: string }; object: { key: string } } | null; r2Deleted: number }>(
      conn,
      'DELETE',
      `/teams/${enc(id)}?confirm=${enc(id)}`,
    );
    if (!r.ok) return (info(formatError(r.error)), 1);
    if (conn.json) printJson(r.value);
    else if (r.value.export) info(`exported to R2: ${r.value.export.directory.key}, ${r.value.export.object.key}`);
    if (r.value.complete) {
      if (!conn.json) out(`deleted team ${id}`);
      return 0;
    }
    info(`deleted ${r.value.r2Deleted} R2 objects; more remain, going on`);
  }
};
