/**
 * Reading rows of the admin API for display. The job and agent rows are the gateway's; the
 * CLI prints the fields it knows (accepting snake_case or camelCase spellings) and `--json`
 * prints the whole row, so a field the gateway adds is never hidden from scripts.
 */
import { visible } from './visible-text.ts';

export type Row = Record<string, unknown>;

/** The first present field among the spellings. */
export function field(r: Row, ...names: string[]): unknown {
  for (const n of names) if (r[n] !== undefined && r[n] !== null) return r[n];
  return undefined;
}

/** A field for display: absent → "-"; anything a user chose made visible (see visible-text.ts). */
export const text = (v: unknown): string =>
  v === undefined || v === null ? '-' : visible(typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v));

/** Epoch ms (or an ISO string) → compact ISO; absent → "-". */
export function when(v: unknown): string {
  if (typeof v === 'number') return new Date(v).toISOString().replace(/\.\d{3}Z$/, 'Z');
  if (typeof v === 'string' && v) return visible(v);
  return '-';
}

export function duration(ms: unknown): string {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '-';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  return `${Math.floor(ms / 60_000)}m${Math.round((ms % 60_000) / 1000)}s`;
}
