/**
 * `gatehouse audit tail`: the newest audit rows, oldest first, optionally following new ones.
 * `gatehouse audit egress`: the jobs' latest network connections, allowed and refused.
 * `gatehouse audit export`: the full trail as NDJSON from a time or a cursor (exported batches in R2, then the rows kept).
 */
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, apiText, connection, formatError, type Connection } from './client.ts';
import { info, iso, out, table } from './io.ts';
import { formatCommand, visible, visibleJson } from './visible-text.ts';
import { AUDIT_TOOLS, type AuditRow, type StorageView } from '../src/contracts/audit.ts';
import type { EgressConnectionView } from '../src/contracts/network.ts';

const TAIL_FLAGS: FlagSpecs = {
  limit: { type: 'string', value: 'N', help: 'how many rows (default 20, at most 500)' },
  follow: { type: 'bool', help: 'keep polling for new rows (Ctrl-C to stop)' },
  interval: { type: 'string', value: 'ms', help: 'poll interval with --follow (default 2000)' },
  decision: { type: 'string', value: 'd', help: 'only allowed | denied | failed | asked (waiting for approval)' },
  tool: { type: 'string', value: 'tool', help: "only this tool or action (listed below; admin.* are the admin API's actions)" },
  subject: { type: 'string', value: 'sub', help: 'only this token subject' },
  since: { type: 'string', value: 'time', help: 'only rows at or after (ms since epoch or ISO date)' },
};

const EGRESS_FLAGS: FlagSpecs = {
  limit: { type: 'string', value: 'N', help: 'how many connections (default 50, at most 200)' },
  refused: { type: 'bool', help: 'only connections the policy refused' },
};

const EXPORT_FLAGS: FlagSpecs = {
  since: { type: 'string', value: 'time', help: 'start at the first row at or after this time (ms since epoch or ISO date)' },
  after: { type: 'string', value: 'cursor', help: 'start after this row id (the "next:" value a previous export printed)' },
  'page-size': { type: 'string', value: 'N', help: 'rows per request (default 5000, at most 10000)' },
};

const AUDIT_HELP = `gatehouse audit — the team's audit log

usage:
  gatehouse audit tail [--limit N] [--follow] [--decision denied] [--tool execute] [--subject s] [--since 2026-11-22]
  gatehouse audit export [--since 2026-11-01 | --after <cursor>] > audit.ndjson
      every row from there to the newest, one JSON object per line (rows past the team's retention
      come from the batches exported before they were dropped); prints "next: <cursor>" on stderr
      for the next run to continue with --after
  gatehouse audit egress [--refused] [--limit N]
      the jobs' latest network connections, newest first: host, method, decision and the reason
  gatehouse audit storage
      the team's storage, its bound (policy retention.maxBytes), the oldest row kept and when
      retention drops the next rows, what was exported so far

flags (tail):
${formatFlags(TAIL_FLAGS)}

tools (--tool):
${wrap(AUDIT_TOOLS)}

flags (egress):
${formatFlags(EGRESS_FLAGS)}

flags (export):
${formatFlags(EXPORT_FLAGS)}`;

/** Names as indented lines of at most about 100 columns. */
function wrap(names: readonly string[]): string {
  const lines: string[] = [];
  for (const n of names) {
    if (lines.length && lines[lines.length - 1].length + n.length < 100) lines[lines.length - 1] += `, ${n}`;
    else lines.push(`  ${n}`);
  }
  return lines.join(',\n');
}

/** The fields of a row that formatRow shows. */
type ShownRow = Pick<AuditRow, 'id' | 'at' | 'subject' | 'tool' | 'command' | 'cwd' | 'decision' | 'reason' | 'jobId' | 'exitStatus' | 'durationMs'>;
type Page = { entries: AuditRow[]; nextCursor: string | null };

/** One row, one line: every field a caller could choose is shown through `visible`. */
export function formatRow(e: ShownRow): string {
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
  if (sub === 'export') return auditExport(rest);
  if (sub === 'storage') return auditStorage(rest);
  if (sub === 'egress') return auditEgress(rest);
  if (sub !== 'tail') throw new UsageError(`unknown audit command "${sub}"; allowed: tail, export, egress, storage`);
  const a = parseArgs(rest, TAIL_FLAGS, 'audit tail');
  if (a.flags.help) return (out(AUDIT_HELP), 0);
  if (a.positionals.length) throw new UsageError('audit tail takes no positional arguments');
  const limit = a.flags.limit === undefined ? 20 : Number(a.flags.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new UsageError(`--limit "${a.flags.limit}" must be an integer from 1 to 500`);
  const interval = a.flags.interval === undefined ? 2000 : Number(a.flags.interval);
  if (!Number.isInteger(interval) || interval < 100) throw new UsageError(`--interval "${a.flags.interval}" must be an integer of at least 100 (ms)`);
  const tool = a.flags.tool;
  if (tool !== undefined && !(AUDIT_TOOLS as readonly string[]).includes(String(tool))) {
    throw new UsageError(`--tool "${visible(String(tool))}" is no audited tool; allowed: ${AUDIT_TOOLS.join(', ')}`);
  }
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
  // `on`, not `once`: bin/gatehouse.mjs may pass on a Ctrl-C the terminal also delivered.
  process.on('SIGINT', onSig);
  process.on('SIGTERM', onSig);
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

/** Pages through `GET /audit/export` until it reaches the newest row, writing each page's NDJSON to stdout as it comes. */
async function auditExport(argv: string[]): Promise<number> {
  const a = parseArgs(argv, EXPORT_FLAGS, 'audit export');
  if (a.flags.help) return (out(AUDIT_HELP), 0);
  if (a.positionals.length) throw new UsageError('audit export takes no positional arguments');
  if (a.flags.since !== undefined && a.flags.after !== undefined) throw new UsageError('pass either --since or --after, not both');
  const size = a.flags['page-size'] === undefined ? 5000 : Number(a.flags['page-size']);
  if (!Number.isInteger(size) || size < 1 || size > 10_000) throw new UsageError(`--page-size "${a.flags['page-size']}" must be an integer from 1 to 10000`);
  const conn = connection(a.flags);
  const q = new URLSearchParams({ limit: String(size) });
  if (a.flags.since !== undefined) q.set('since', String(a.flags.since));
  if (a.flags.after !== undefined) q.set('after', String(a.flags.after));
  let rows = 0;
  for (;;) {
    const r = await apiText(conn, `/audit/export?${q}`);
    if (!r.ok) {
      info(formatError(r.error));
      if (q.has('after')) info(`next: ${q.get('after')}`);
      return 1;
    }
    if (r.value.text) process.stdout.write(r.value.text);
    rows += r.value.text.split('\n').filter(Boolean).length;
    const next = r.value.headers.get('Gatehouse-Next-After') ?? '';
    q.delete('since');
    q.set('after', next);
    if (r.value.headers.get('Gatehouse-Export-Complete') === 'true') break;
  }
  info(`${rows} rows; next: ${q.get('after')}`);
  return 0;
}

const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

/** `gatehouse audit storage`: what the team keeps and what retention does next. */
async function auditStorage(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'audit storage');
  if (a.flags.help) return (out(AUDIT_HELP), 0);
  if (a.positionals.length) throw new UsageError('audit storage takes no positional arguments');
  const r = await api<StorageView>(connection(a.flags), 'GET', '/audit/storage');
  if (!r.ok) return (info(formatError(r.error)), 1);
  const v = r.value;
  if (a.flags.json) return (out(visibleJson(v)), 0);
  out(`storage        ${mb(v.bytes)} of ${mb(v.maxBytes)} (policy retention.maxBytes)`);
  out(`audit kept     ${v.auditDays} days (policy retention.auditDays); oldest row ${v.oldestAuditAt === null ? '—' : iso(v.oldestAuditAt)}`);
  out(`next drop      ${v.nextDropAt === null ? 'nothing due' : iso(v.nextDropAt)} (exported to R2 first)`);
  out(`exported       ${v.exported.rows} rows in ${v.exported.batches} batches (gatehouse audit export reads them)`);
  if (v.lastError) out(`last error     ${visible(v.lastError)}`);
  return 0;
}

/** `gatehouse audit egress`: one line per connection a job's egress proxy made or refused, newest first. */
async function auditEgress(argv: string[]): Promise<number> {
  const a = parseArgs(argv, EGRESS_FLAGS, 'audit egress');
  if (a.flags.help) return (out(AUDIT_HELP), 0);
  if (a.positionals.length) throw new UsageError('audit egress takes no positional arguments');
  const limit = a.flags.limit === undefined ? 50 : Number(a.flags.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 200) throw new UsageError(`--limit "${a.flags.limit}" must be an integer from 1 to 200`);
  const q = new URLSearchParams({ limit: String(limit) });
  if (a.flags.refused) q.set('refused', '1');
  const r = await api<{ connections: EgressConnectionView[] }>(connection(a.flags), 'GET', `/audit/egress?${q}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (out(visibleJson(r.value)), 0);
  const rows = r.value.connections;
  if (!rows.length) return (info(a.flags.refused ? 'no refused connections' : 'no network connections'), 0);
  out(
    table([
      ['STARTED', 'JOB', 'HOST', 'METHOD', 'DECISION', 'UP/DOWN', 'CREDENTIAL', 'REASON'],
      ...rows.map((c) => [
        visible(c.started_at),
        visible(c.job_id),
        `${visible(c.host)}:${c.port}`,
        c.method === null ? '-' : visible(c.method),
        c.decision,
        `${c.bytes_up}/${c.bytes_down} B`,
        // The secret's name only: the edge never stores a value.
        c.credential ? visible(c.credential) : '-',
        visible(c.reason),
      ]),
    ]),
  );
  return 0;
}
