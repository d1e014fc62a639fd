/**
 * What a search asks of a decoded index (./format.ts): which blocks may hold a match of its terms, and where a line
 * starts when the index records it.
 */
import { type DigitProbe, digitProbes, digitsMayHold } from './digits.ts';
import { type BlockIndex, type IndexBlock, trigramBit } from './format.ts';

/** What a block must hold for a line of it to match one term: all its trigrams, and its digit runs where they sit. */
export interface TermProbe {
  trigrams: number[];
  digits: DigitProbe[];
}

/**
 * Each term as the index can test it, or null when the index cannot narrow this query: a term is
 * not ASCII or shorter than 3 characters (after lowercasing, as the line search does). Terms that
 * can never match (empty, or holding '\n') are left out, as the line search does.
 */
export function termProbes(terms: string[]): TermProbe[] | null {
  const lowered = [...new Set(terms.map((t) => t.toLowerCase()).filter((t) => t.length > 0 && !t.includes('\n')))];
  if (lowered.length === 0) return null;
  const out: TermProbe[] = [];
  for (const term of lowered) {
    if (term.length < 3 || /[^\x00-\x7f]/.test(term)) return null;
    const tris = new Set<number>();
    for (let i = 0; i + 3 <= term.length; i++) tris.add((term.charCodeAt(i) << 16) | (term.charCodeAt(i + 1) << 8) | term.charCodeAt(i + 2));
    out.push({ trigrams: [...tris], digits: digitProbes(term) });
  }
  return out;
}

/** May the block hold a line that matches one of the terms (from `termProbes`)? */
export function mayMatch(block: IndexBlock, terms: TermProbe[]): boolean {
  const ranges = block.digits;
  return terms.some((p) => trigramsMayHold(block, p.trigrams) && (ranges === null || p.digits.every((d) => digitsMayHold(ranges, d))));
}

function trigramsMayHold(block: IndexBlock, tris: number[]): boolean {
  const f = block.filter;
  if (!f) return true;
  return tris.every((t) => {
    const h = trigramBit(t, block.filterLog2);
    return (f[h >>> 3] & (1 << (h & 7))) !== 0;
  });
}

/** Index of the block holding 0-based line `line` (< totalLines). */
function blockOfLine(ix: BlockIndex, line: number): IndexBlock {
  let lo = 0;
  let hi = ix.blocks.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (ix.blocks[mid].startLine <= line) lo = mid;
    else hi = mid - 1;
  }
  return ix.blocks[lo];
}

/**
 * Byte offset where 0-based line `line` starts (the end of the line before it; totalBytes for
 * totalLines), or null when the index does not record it: only lines near a block's edges are.
 */
export function lineBoundary(ix: BlockIndex, line: number): number | null {
  if (line <= 0) return 0;
  if (line >= ix.totalLines) return ix.totalBytes;
  const b = blockOfLine(ix, line);
  const k = line - b.startLine;
  if (k === 0) return b.start;
  if (k - 1 < b.firstEnds.length) return b.firstEnds[k - 1];
  const fromEnd = k - (b.lines - b.lastStarts.length);
  return fromEnd >= 0 ? b.lastStarts[fromEnd] : null;
}
