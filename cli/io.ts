/** Output helpers: data to stdout, diagnostics to stderr (so `gatehouse policy get > file` stays clean). */
export const out = (s: string) => void process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
export const info = (s: string) => void process.stderr.write(s.endsWith('\n') ? s : `${s}\n`);
export const printJson = (v: unknown) => out(JSON.stringify(v, null, 2));
export const iso = (ms: number | null | undefined) => (ms == null ? '-' : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z'));

export function table(rows: string[][]): string {
  if (!rows.length) return '';
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')).join('\n');
}
