/**
 * What an approval is bound to: a hash of the exact request (everything that decides what runs —
 * command, args, code, stdin, cwd, env, timeout), and the line an approver reads.
 */
import { redact, redactString } from '../store/audit.ts';

export interface ApprovableRequest {
  tool: string;
  mode: string;
  command: string;
  args: string[];
  runtime?: string;
  code?: string;
  stdin?: string;
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

/** JSON with object keys sorted, so `{a, b}` and `{b, a}` hash alike. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(',')}}`;
  }
  return JSON.stringify(v ?? null);
}

export async function requestHash(r: ApprovableRequest): Promise<string> {
  const bytes = new TextEncoder().encode(canonical({ v: 1, ...r }));
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

const MAX_SUMMARY = 2000;

/** One line for the approver: what runs, where, with which environment names (values redacted). */
export function requestSummary(r: ApprovableRequest): string {
  const what =
    r.mode === 'shell'
      ? `sh -c ${JSON.stringify(redactString(r.command))}`
      : (redact([r.command, ...r.args]) as string[]).map((a) => (/^[A-Za-z0-9_./:=@%+-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
  const parts = [`${r.tool}${r.runtime ? ` (${r.runtime})` : ''}: ${what}`];
  if (r.code !== undefined) parts.push(`code: ${JSON.stringify(redactString(r.code.length > 400 ? `${r.code.slice(0, 400)}…` : r.code))}`);
  if (r.cwd) parts.push(`cwd: ${r.cwd}`);
  if (r.env && Object.keys(r.env).length) parts.push(`env: ${Object.keys(r.env).sort().join(', ')}`);
  if (r.stdin !== undefined) parts.push(`stdin: ${r.stdin.length} characters`);
  const s = parts.join('; ');
  return s.length > MAX_SUMMARY ? `${s.slice(0, MAX_SUMMARY)}…` : s;
}
