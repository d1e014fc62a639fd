/** `gatehouse approvals list|show|approve|deny`: approvals of the policy's `ask` decisions. */
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { field, text, when, type Row } from './fields.ts';
import { info, out, printJson, table } from './io.ts';

const LIST_FLAGS: FlagSpecs = {
  status: { type: 'string', value: 'status', help: 'only approvals in this status (pending, approved, denied, used, expired)' },
  limit: { type: 'string', value: 'N', help: 'how many (default 50; at most 200)' },
};
const DECIDE_FLAGS: FlagSpecs = {
  note: { type: 'string', value: 'text', help: 'why (kept with the decision and in the audit log)' },
};

const APPROVALS_HELP = `gatehouse approvals — approve or deny runs the team policy asks a person about (rule decision "ask")

usage:
  gatehouse approvals list [--status pending] [--limit N]     newest first
  gatehouse approvals show <approval id>                      what was asked, by whom, and what happened
  gatehouse approvals approve <approval id> [--note text]     the caller may then retry with the id, once
  gatehouse approvals deny <approval id> [--note text]

flags (list):
${formatFlags(LIST_FLAGS)}`;

const help = (usage: string, specs: FlagSpecs) => out(`${usage}\n\nflags:\n${formatFlags(specs)}`);

export async function approvalsCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'list':
      return list(rest);
    case 'show':
      return show(rest);
    case 'approve':
      return decide(rest, true);
    case 'deny':
      return decide(rest, false);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(APPROVALS_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown approvals command "${sub}"; allowed: list, show, approve, deny`);
  }
}

async function list(argv: string[]): Promise<number> {
  const a = parseArgs(argv, LIST_FLAGS, 'approvals list');
  if (a.flags.help) return (help('usage: gatehouse approvals list [--status s] [--limit N]', LIST_FLAGS), 0);
  if (a.positionals.length || a.rest.length) throw new UsageError('approvals list takes no positional arguments');
  const q = new URLSearchParams();
  if (a.flags.status !== undefined) q.set('status', String(a.flags.status));
  if (a.flags.limit !== undefined) {
    const n = Number(a.flags.limit);
    if (!Number.isInteger(n) || n < 1 || n > 200) throw new UsageError(`--limit "${a.flags.limit}" must be an integer from 1 to 200`);
    q.set('limit', String(n));
  }
  const r = await api<{ approvals: Row[] }>(connection(a.flags), 'GET', `/approvals${q.size ? `?${q}` : ''}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const rows = r.value.approvals ?? [];
  if (!rows.length) info(a.flags.status ? `no ${String(a.flags.status)} approvals` : 'no approvals');
  else {
    out(
      table([
        ['ID', 'STATUS', 'SUBJECT', 'CREATED', 'EXPIRES', 'REQUEST'],
        ...rows.map((x) => [text(x.id), text(x.status), text(x.subject), when(x.created_at), when(x.expires_at), text(x.summary)]),
      ]),
    );
  }
  return 0;
}

function oneId(a: { positionals: string[]; rest: string[] }, verb: string): string {
  const ids = [...a.positionals, ...a.rest];
  if (ids.length !== 1) throw new UsageError(`usage: gatehouse approvals ${verb} <approval id> (exactly one id; see gatehouse approvals list)`);
  return ids[0];
}

function print(x: Row): void {
  const lines: [string, string][] = [
    ['approval', text(x.id)],
    ['status', text(x.status)],
    ['asked by', text(x.subject)],
    ['request', text(x.summary)],
    ['why', text(x.reason)],
    ['channel', text(x.channel)],
    ['created', when(x.created_at)],
    ['expires', when(x.expires_at)],
    ['decided', `${when(x.decided_at)}${field(x, 'decided_by') !== undefined ? ` by ${text(x.decided_by)}` : ''}`],
  ];
  if (field(x, 'note') !== undefined) lines.push(['note', text(x.note)]);
  if (field(x, 'job_id') !== undefined) lines.push(['used by', `job ${text(x.job_id)} at ${when(x.used_at)}`]);
  out(lines.map(([k, v]) => `${`${k}:`.padEnd(10)}${v}`).join('\n'));
}

async function show(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'approvals show');
  if (a.flags.help) return (help('usage: gatehouse approvals show <approval id>', {}), 0);
  const id = oneId(a, 'show');
  const r = await api<{ approval: Row }>(connection(a.flags), 'GET', `/approvals/${encodeURIComponent(id)}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  print(r.value.approval);
  return 0;
}

async function decide(argv: string[], approve: boolean): Promise<number> {
  const verb = approve ? 'approve' : 'deny';
  const a = parseArgs(argv, DECIDE_FLAGS, `approvals ${verb}`);
  if (a.flags.help) return (help(`usage: gatehouse approvals ${verb} <approval id> [--note text]`, DECIDE_FLAGS), 0);
  const id = oneId(a, verb);
  const body = a.flags.note !== undefined ? { note: String(a.flags.note) } : {};
  const r = await api<{ approval: Row }>(connection(a.flags), 'POST', `/approvals/${encodeURIComponent(id)}/${verb}`, body);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const x = r.value.approval;
  out(
    approve
      ? `approved ${id}: ${text(x.subject)} may now retry this call once, with approval_id "${id}" (until ${when(x.expires_at)})\n  ${text(x.summary)}`
      : `denied ${id}: ${text(x.summary)}`,
  );
  return 0;
}
