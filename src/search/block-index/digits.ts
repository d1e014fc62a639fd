/**
 * What a block's numbers can hold, for the terms trigrams cannot narrow: 1 MB of consecutive numbers holds every digit
 * trigram, but its digit runs (maximal runs of ASCII digits '0'–'9' in a line) lie in narrow ranges. Per block and per
 * run length 1–15 present the index keeps the least and greatest run of that length read as a number, and whether a longer run
 * occurs. A term's own digit runs then say what a matching line must hold, by where they sit in the term:
 *
 * - a run with a non-digit on both sides in the term ("id 4711 ") is a whole run of the line: its length's range must
 *   hold it;
 * - a run that ends the term ("id 47") starts a run of the line: the range of some length ≥ its own, cut to its first
 *   digits, must hold it; a run that starts the term ("4711 ms") ends a run of the line: likewise with the last digits;
 * - a term of digits only ("4711") lies anywhere inside a run of the line: some stretch of some run length must hold it.
 *
 * The digits of a range of numbers at one place form a range too (possibly wrapping past 9…9 to 0…0): that is the whole
 * test, in exact integer arithmetic (15 digits < 2^53). Runs of 16 digits and more are not kept; a block that has one
 * cannot rule out a term that could lie in it. Like the trigram filter, this may say yes wrongly, never no wrongly:
 * the line search matches lowercased text, and lowercasing never makes or removes an ASCII digit.
 */

/** Longest digit run kept as a number: 10^15 < 2^53, so its value and every cut of it below are exact. */
export const DIGITS_MAX = 15;
const POW10 = Array.from({ length: DIGITS_MAX + 2 }, (_, i) => 10 ** i);

/** A block's digit runs: for each run length present, ascending, its length, least and greatest run, flattened. */
export interface DigitRanges {
  runs: number[];
  /** A run longer than DIGITS_MAX digits occurs. */
  long: boolean;
}

/** Collects the runs of the block being read (the builder's side); `take` hands them on and starts afresh. */
export class DigitRangeBuilder {
  private readonly lo = new Float64Array(DIGITS_MAX + 1).fill(Infinity);
  private readonly hi = new Float64Array(DIGITS_MAX + 1).fill(-1);
  private long = false;

  /** One run of `len` digits whose value is `value` (exact when len ≤ DIGITS_MAX). */
  add(len: number, value: number): void {
    if (len > DIGITS_MAX) {
      this.long = true;
      return;
    }
    if (value < this.lo[len]) this.lo[len] = value;
    if (value > this.hi[len]) this.hi[len] = value;
  }

  take(): DigitRanges {
    const runs: number[] = [];
    for (let k = 1; k <= DIGITS_MAX; k++) if (this.lo[k] <= this.hi[k]) runs.push(k, this.lo[k], this.hi[k]);
    const out = { runs, long: this.long };
    this.lo.fill(Infinity);
    this.hi.fill(-1);
    this.long = false;
    return out;
  }
}

/** Where a term's digit run sits, which says what part of a line's run it must be. */
export type DigitPlace = 'whole' | 'prefix' | 'suffix' | 'inside';

export interface DigitProbe {
  digits: number;
  value: number;
  place: DigitPlace;
}

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

/**
 * The digit runs of a lowercased term, with what each must be of a line's run: `whole` (a non-digit on both sides in
 * the term), `prefix` (it ends the term, so the line's run starts with it), `suffix` (it starts the term), `inside` (the
 * term is only digits). Values are exact only up to DIGITS_MAX digits; a longer run is tested by length alone.
 */
export function digitProbes(term: string): DigitProbe[] {
  const out: DigitProbe[] = [];
  for (let i = 0; i < term.length; ) {
    if (!isDigit(term.charCodeAt(i))) {
      i++;
      continue;
    }
    const from = i;
    let value = 0;
    for (; i < term.length && isDigit(term.charCodeAt(i)); i++) if (i - from < DIGITS_MAX) value = value * 10 + (term.charCodeAt(i) - 0x30);
    const before = from > 0;
    const after = i < term.length;
    out.push({ digits: i - from, value, place: before && after ? 'whole' : before ? 'prefix' : after ? 'suffix' : 'inside' });
  }
  return out;
}

/** Does {⌊x / 10^shift⌋ mod 10^digits : lo ≤ x ≤ hi} hold v? The cut of a range is a range, wrapping at most once. */
function cutHolds(lo: number, hi: number, shift: number, digits: number, v: number): boolean {
  const a = Math.floor(lo / POW10[shift]);
  const b = Math.floor(hi / POW10[shift]);
  const m = POW10[digits];
  if (b - a + 1 >= m) return true;
  const x = a % m;
  const y = b % m;
  return x <= y ? v >= x && v <= y : v >= x || v <= y;
}

/** May a line of a block with these digit runs hold the probe's run where its place says? */
export function digitsMayHold(r: DigitRanges, p: DigitProbe): boolean {
  const L = p.digits;
  if (L > DIGITS_MAX) return r.long;
  const runs = r.runs;
  if (p.place === 'whole') {
    for (let i = 0; i < runs.length; i += 3) if (runs[i] === L) return runs[i + 1] <= p.value && p.value <= runs[i + 2];
    return false;
  }
  // A run longer than DIGITS_MAX may start with, end with or hold any shorter run.
  if (r.long) return true;
  for (let i = 0; i < runs.length; i += 3) {
    const k = runs[i];
    if (k < L) continue;
    // shift: digits of the line's run after the probe's; 0 when it ends the run, k − L when it starts it.
    const first = p.place === 'prefix' ? k - L : 0;
    const last = p.place === 'suffix' ? 0 : k - L;
    for (let shift = first; shift <= last; shift++) if (cutHolds(runs[i + 1], runs[i + 2], shift, L, p.value)) return true;
  }
  return false;
}
