/** `gatehouse audit tail`: the newest audit rows, oldest first, optionally following new ones. */
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError, type Connection } from './client.ts';
import { info, iso, out } from './io.ts';
import { formatCommand, visible, visibleJson } from './visible-text.ts';

const TAIL_FLAGS: FlagSpecs = {
  limit: { type: 'string', value: 'N', help: 'how many rows (default 20, at most 500)' },
  follow: { type: 'bool', help: 'keep polling for new rows (Ctrl-C to stop)' },
  interval: { type: 'string', value: 'ms', help: 'poll interval with --follow (default 2000)' },
  decision: { type: 'string', value: 'd', help: 'only allowed | denied | failed | asked (waiting for approval)' },
  tool: { type: 'string', value: 'tool', help: 'only this tool (execute, runtime_execute, query_output, policy_check, list_runtimes)' },
  subject: { type: 'string', value: 'sub', help: 'only this token subject' },
  since: { type: 'string', value: 'time', help: 'only rows at or after (ms since epoch or ISO date)' },
};

const AUDIT_HELP = `gatehouse audit — the team's audit log

usage:
  gatehouse audit tail [--limit N] [--follow] [--decision denied] [--tool execute] [--subject s] [--since 2026-11-22]

flags:
${formatFlags(TAIL_FLAGS)}`;

export interface AuditRow {
  id: number;
  at: number;
  subject: string;
  tool: string;
  command: unknown;
  cwd: string | null;
  decision: string;
  reason: string | null;
  jobId: string | null;
  exitStatus: string | null;
  durationMs: number | null;
}
type Page = { entries: AuditRow[]; nextCursor: string | null };

/** One row, one line: every field a caller could choose is shown through `visible`. */
export function formatRow(e: AuditRow): string {
  const bits = [iso(e.at), visible(e.decision).padEnd(7), visible(e.tool).padEnd(15), visible(e.subject), formatCommand(e.command)];
  const tail = [e.exitStatus, e.reason]
    .filter(Boolean)
    .map((x) => visible(String(x)))
    .join(' — ');
  return `${bits.join('  ')}${tail ? `  — ${tail}` : ''}`;
}

export async function auditCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    out(AUDIT_HELP);
    return sub === undefined ? 2 : 0;
  }
  if (sub !== 'tail') throw new UsageError(`unknown audit command "${sub}"; allowed: tail`);
  const a = parseArgs(rest, TAIL_FLAGS, 'audit tail');
  if (a.flags.help) return (out(AUDIT_HELP), 0);
  if (a.positionals.length) throw new UsageError('audit tail takes no positional arguments');
  const limit = a.flags.limit === undefined ? 20 : Number(a.flags.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new UsageError(`--limit "${a.flags.limit}" must be an integer from 1 to 500`);
  const interval = a.flags.interval === undefined ? 2000 : Number(a.flags.interval);
  if (!Number.isInteger(interval) || interval < 100) throw new UsageError(`--interval "${a.flags.interval}" must be an integer of at least 100 (ms)`);
  const filters = new URLSearchParams();
  for (const k of ['decision', 'tool', 'subject', 'since'] as const) if (a.flags[k] !== undefined) filters.set(k, String(a.flags[k]));
  const conn = connection(a.flags);
  const first = await page(conn, filters, limit);
  if (!first.ok) return (info(formatError(first.error)), 1);
  const print = (e: AuditRow) => out(a.flags.json ? visibleJson(e) : formatRow(e));
  first.value.entries.slice().reverse().forEach(print);
  if (!a.flags.follow) return 0;
  let lastId = first.value.entries[0]?.id ?? 0;
  let stop = false;
  const onSig = () => {
    stop = true;
  };
  process.once('SIGINT', onSig);
  process.once('SIGTERM', onSig);
  try {
    while (!stop) {
      await sleep(interval, () => stop);
      if (stop) break;
      const fresh = await newerThan(conn, filters, lastId);
      if (!fresh.ok) {
        info(formatError(fresh.error));
        continue;
      }
      fresh.value.forEach(print);
      if (fresh.value.length) lastId = fresh.value[fresh.value.length - 1].id;
    }
  } finally {
    process.off('SIGINT', onSig);
    process.off('SIGTERM', onSig);
  }
  return 0;
}

function page(conn: Connection, filters: URLSearchParams, limit: number, cursor?: string) {
  const q = new URLSearchParams(filters);
  q.set('limit', String(limit));
  if (cursor) q.set('cursor', cursor);
  return api<Page>(conn, 'GET', `/audit?${q}`);
}

/** Rows with id > lastId, oldest first (pages back through the cursor until it reaches lastId). */
async function newerThan(conn: Connection, filters: URLSearchParams, lastId: number) {
  const got: AuditRow[] = [];
  let cursor: string | undefined;
  for (;;) {
    const r = await page(conn, filters, 200, cursor);
    if (!r.ok) return r;
    const fresh = r.value.entries.filter((e) => e.id > lastId);
    got.push(...fresh);
    if (fresh.length < r.value.entries.length || !r.value.nextCursor) break;
    cursor = r.value.nextCursor;
  }
  return { ok: true as const, value: got.reverse() };
}

async function sleep(ms: number, stopped: () => boolean): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until && !stopped()) await new Promise((r) => setTimeout(r, Math.min(100, until - Date.now())));
}
