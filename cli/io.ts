/** Output helpers: data to stdout, diagnostics to stderr (so `gatehouse policy get > file` stays clean). */
import { visible, visibleJson } from './visible-text.ts';

export const out = (s: string) => void process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
export const info = (s: string) => void process.stderr.write(s.endsWith('\n') ? s : `${s}\n`);
export const printJson = (v: unknown) => out(visibleJson(v, 2));
export const iso = (ms: number | null | undefined) => (ms == null ? '-' : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z'));

/** Columns aligned; every cell through `visible` (a cell is gateway data), so a row stays one line. */
export function table(cells: string[][]): string {
  const rows = cells.map((r) => r.map((c) => visible(String(c ?? ''))));
  if (!rows.length) return '';
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n');
}
