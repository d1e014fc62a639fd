/**
 * The search's rows of `npm run bench` and `npm run bench:search`: each target with its figure, the previous figure
 * (bench/RESULTS.md, same label: bench/previous.ts) and the ratio of the two, from bench/search.ts's figures (module
 * level; bench/output.ts times `query_output` end to end).
 */
import { previousFigure } from './previous.ts';
import type { CorpusFigures, QueryFigures, SearchBench } from './search.ts';

/** Issue targets on this 2-CPU host, module level. */
const TARGETS = {
  fallbackMbPerS: 500,
  rareNumberSeqMs: 150,
  rareWordLogMs: 50,
  rareTermBigMs: 150,
  indexSharePct: 2,
};

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
const ms = (x: number) => `${x.toFixed(1)} ms`;
const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');

/** One row: label, figure, the previous figure (same label), ratio, target and details. */
export function compared(label: string, figure: number, unit: (x: number) => string, target: string): string[] {
  const prev = previousFigure([label]);
  const ratio = prev?.value ? `${(figure / prev.value).toFixed(2)}×` : '';
  return [label, unit(figure), prev?.text || 'none yet', ratio, target];
}

function fallbackRow(c: CorpusFigures, q: QueryFigures, what: string): string[] {
  const w = q.whole;
  if (!w) throw new Error(`${c.name}: no whole scan was timed`);
  const cpuRate = Math.round(c.bytes / 1e3 / w.cpuMs);
  return compared(
    `search: whole scan (the fallback), ${c.name} (${mb(c.bytes)}), ${what}`,
    w.mbPerS,
    (x) => `${x} MB/s`,
    // On a shared host the process may get a fraction of a CPU: the rate of its CPU time says what the scan itself does.
    `≥ ${TARGETS.fallbackMbPerS} MB/s: ${verdict(w.mbPerS >= TARGETS.fallbackMbPerS)} in wall time, ${verdict(cpuRate >= TARGETS.fallbackMbPerS)} in CPU time (${cpuRate} MB/s); p50 ${ms(w.wallMs)} wall, ${ms(w.cpuMs)} CPU`,
  );
}

function indexedRow(c: CorpusFigures, q: QueryFigures, what: string, targetMs: number | null): string[] {
  const i = q.indexed;
  const read = i.narrowed ? `${mb(i.readBytes)} read` : 'not narrowed: scanned whole';
  const whole = q.whole ? `; whole scan ${ms(q.whole.wallMs)} (${(q.whole.wallMs / i.wallMs).toFixed(1)}×)` : '';
  const target = targetMs === null ? '' : `≤ ${targetMs} ms: ${verdict(i.wallMs <= targetMs)}; `;
  return compared(
    `search: ${what} in ${c.name} (${mb(c.bytes)}), through the index`,
    i.wallMs,
    ms,
    `${target}${ms(i.cpuMs)} CPU, ${read}, ${q.matches} matching line${q.matches === 1 ? '' : 's'}${whole}`,
  );
}

function indexRow(c: CorpusFigures): string[] {
  const share = (100 * c.indexBytes) / c.bytes;
  return compared(
    `search: index of ${c.name} (${mb(c.bytes)}), share of the body`,
    share,
    (x) => `${x.toFixed(2)} %`,
    `≤ ${TARGETS.indexSharePct} %: ${verdict(share <= TARGETS.indexSharePct)}; ${(c.indexBytes / 1024).toFixed(0)} KiB, built in ${c.indexBuildMs} ms of CPU (the agent's, per upload)`,
  );
}

/** The search targets of bench/search.ts's figures, a header row first. */
export function searchTargetRows(b: SearchBench): string[][] {
  const [seqNumber] = b.seq.queries;
  const [logWord, logNumber] = b.log.queries;
  const rows: string[][] = [['measure', 'figure', 'previous', 'ratio', 'target']];
  rows.push(fallbackRow(b.seq, seqNumber, 'a number'));
  rows.push(fallbackRow(b.log, logWord, 'a word'));
  rows.push(indexedRow(b.seq, seqNumber, 'a rare number', TARGETS.rareNumberSeqMs));
  rows.push(indexedRow(b.log, logWord, 'a rare word', TARGETS.rareWordLogMs));
  if (b.big) rows.push(indexedRow(b.big, b.big.queries[0], 'a rare word', TARGETS.rareTermBigMs));
  // No target: the log's 8-digit line numbers share their length with hash fragments, whose range spans everything.
  rows.push(indexedRow(b.log, logNumber, 'a line number', null));
  for (const c of [b.seq, b.log, ...(b.big ? [b.big] : [])]) rows.push(indexRow(c));
  return rows;
}
