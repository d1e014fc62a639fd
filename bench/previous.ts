/**
 * The previous figure of a row, read from bench/RESULTS.md: the first table row (newest results come
 * first) whose first cell is the label, and the cell asked for. Figures are compared as numbers: the
 * first number in the cell ("59.4 ms" → 59.4, "0 errors" → 0).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const RESULTS = join(import.meta.dirname, 'RESULTS.md');

export interface Previous {
  text: string;
  value: number | null;
}

let rows: string[][] | null = null;

function tableRows(): string[][] {
  if (rows) return rows;
  let text = '';
  try {
    text = readFileSync(RESULTS, 'utf8');
  } catch {
    /* no results yet */
  }
  rows = text
    .split('\n')
    .filter((l) => l.startsWith('|') && !/^\|[\s-|]+$/.test(l))
    .map((l) =>
      l
        .slice(1, l.trimEnd().endsWith('|') ? l.trimEnd().length - 1 : undefined)
        .split('|')
        .map((c) => c.trim()),
    );
  return rows;
}

/** Cell `column` (0 is the label) of the newest row labelled one of `labels`, or null. */
export function previousFigure(labels: string[], column = 1): Previous | null {
  for (const r of tableRows()) {
    if (!labels.includes(r[0])) continue;
    const text = r[column] ?? '';
    const m = /-?\d+(\.\d+)?/.exec(text);
    return { text, value: m ? Number(m[0]) : null };
  }
  return null;
}
