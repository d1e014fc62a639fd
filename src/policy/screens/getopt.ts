/**
 * A getopt_long-style scanner for the argument screens. Screens must see arguments the way the
 * program's own parser does, or an attacker picks the difference: `tar -c -f -- --checkpoint-action=…`
 * looks like "options end at --" to a naive scan, while getopt takes `--` as the value of `-f`
 * and goes on parsing options. Rules followed (GNU getopt_long, git's parse-options):
 * - a short letter that takes a value takes the rest of its cluster, or else the next argument,
 *   whatever it is (`--` included); letters after it in the cluster are that value;
 * - `--name=value`, `--name value` for options that require a value; unambiguous prefixes of a
 *   long name are that option (`--bra` is `--branch`);
 * - options may follow operands (argument permutation) unless the spec says options stop there;
 * - a bare `--` that is not an option's value ends the options.
 * Where the spec does not know an option, the scanner assumes the worst for the screen: an unknown
 * option may take the next argument as its value, so a `--` right after it does NOT end the scan.
 */

export type Arity = 'none' | 'required' | 'optional';

export interface GetoptSpec {
  /** Short letters that require a value (`f` for `tar -f FILE`). */
  shortValued?: string;
  /** Short letters whose value is optional and only ever attached (`sed -i[SUFFIX]`). */
  shortOptional?: string;
  /** Short letters known to take no value; when given, other letters are treated as "may take a value". */
  shortFlags?: string;
  /** Long options and whether they take a value. Unknown long options may take one. */
  long?: Readonly<Record<string, Arity>>;
  /** Options end at the first operand (POSIX, and programs like git before the subcommand). */
  stopAtOperand?: boolean;
}

export type Token =
  | { kind: 'short'; letter: string; value: string | undefined; arg: string; index: number }
  | { kind: 'long'; name: string; known: boolean; value: string | undefined; arg: string; index: number }
  | { kind: 'operand'; arg: string; index: number; afterTerminator: boolean };

/** The full long-option name `name` stands for, or null when unknown or ambiguous. */
function resolveLong(spec: GetoptSpec, name: string): string | null {
  const long = spec.long ?? {};
  if (Object.hasOwn(long, name)) return name;
  if (name === '') return null;
  const hits = Object.keys(long).filter((k) => k.startsWith(name));
  if (hits.length === 1) return hits[0];
  // getopt_long accepts an ambiguous prefix when every candidate behaves the same way.
  if (hits.length > 1 && hits.every((h) => long[h] === long[hits[0]])) return hits[0];
  return null;
}

/** Scans `args` from `from` into option and operand tokens, the way the program would. */
export function scanOptions(args: readonly string[], spec: GetoptSpec, from = 0): Token[] {
  const out: Token[] = [];
  const long = spec.long ?? {};
  /** The previous option might have taken the next argument: a `--` there is not a terminator. */
  let mayBeValue = false;
  let i = from;
  for (; i < args.length; i++) {
    const a = args[i];
    const prevMay = mayBeValue;
    mayBeValue = false;
    if (a === '--') {
      if (prevMay) continue; // perhaps the value of an option we do not know: keep scanning
      i++;
      break;
    }
    if (a.startsWith('--')) {
      const eq = a.indexOf('=');
      const raw = eq < 0 ? a.slice(2) : a.slice(2, eq);
      const name = resolveLong(spec, raw);
      let value = eq < 0 ? undefined : a.slice(eq + 1);
      if (name === null) {
        out.push({ kind: 'long', name: raw, known: false, value, arg: a, index: i });
        if (value === undefined) mayBeValue = true;
        continue;
      }
      if (value === undefined && long[name] === 'required') value = args[++i];
      out.push({ kind: 'long', name, known: true, value, arg: a, index: i });
      continue;
    }
    if (a.length > 1 && a[0] === '-') {
      const start = i;
      for (let j = 1; j < a.length; j++) {
        const c = a[j];
        if (spec.shortValued?.includes(c)) {
          const value = j + 1 < a.length ? a.slice(j + 1) : args[++i];
          out.push({ kind: 'short', letter: c, value, arg: a, index: start });
          break;
        }
        if (spec.shortOptional?.includes(c)) {
          out.push({ kind: 'short', letter: c, value: a.slice(j + 1), arg: a, index: start });
          break;
        }
        out.push({ kind: 'short', letter: c, value: undefined, arg: a, index: start });
        if (j === a.length - 1 && spec.shortFlags !== undefined && !spec.shortFlags.includes(c)) mayBeValue = true;
      }
      continue;
    }
    out.push({ kind: 'operand', arg: a, index: i, afterTerminator: false });
    if (spec.stopAtOperand) {
      i++;
      break;
    }
  }
  for (; i < args.length; i++) out.push({ kind: 'operand', arg: args[i], index: i, afterTerminator: true });
  return out;
}

/**
 * True if long token `t` is option `full` or, for unknown spellings, could be read as it: an
 * unknown or ambiguous prefix of `full` counts, because the program's own list decides, not ours.
 */
export function longIs(t: Token, full: string): boolean {
  if (t.kind !== 'long') return false;
  if (t.name === full) return true;
  return !t.known && t.name !== '' && full.startsWith(t.name);
}
