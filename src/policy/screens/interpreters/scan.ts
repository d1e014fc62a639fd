/**
 * The scan of an interpreter's arguments against its table entry (./spec.ts): inline-code options, stdin as a file,
 * and the one rule for a program read from stdin.
 */
import { inlineDenied, type ScreenContext } from '../common.ts';
import { longOption, shortCluster } from '../options.ts';
import { type Interpreter, STDIN, type StdinCode } from './spec.ts';

/** Arguments that print something and exit: an interpreter given one needs no script. */
export const INFO = new Set(['--version', '--help', '-version', '-help', '-?']);

export const FROM_STDIN = 'it reads the program from stdin, which the policy cannot screen';
export const NO_SCRIPT_REASON = 'no script is given, so it would read the program from stdin';
export const AFTER_FILES_REASON = 'it reads more program from stdin after the files it is given (a REPL follows them), which the policy cannot screen';

/** What a scan saw, for the one stdin rule. */
export interface StdinSeen {
  /** A script was given: a positional the program takes as its script, or a script option's value. */
  given: boolean;
  /** An option after which stdin cannot carry a program (`erl -noshell`). */
  safe: boolean;
  /** An argument that prints something and exits (`--version`). */
  info: boolean;
}

/**
 * The one rule for code on stdin: a program that reads its program from stdin when no script is
 * given (`when: 'no-script'`), or also after its files (`when: 'always'`), is denied with the same
 * reason for every program; `argumentRules[exe].allowInlineCode` permits it like inline code.
 */
export function stdinCodeReason(code: StdinCode | undefined, seen: StdinSeen, shown: string, ctx: ScreenContext): string | null {
  if (!code || seen.safe || seen.info) return null;
  if (!seen.given) return inlineDenied(shown || '(none)', ctx, NO_SCRIPT_REASON);
  return code.when === 'always' ? inlineDenied(shown, ctx, AFTER_FILES_REASON) : null;
}

const SLASH_OPTION = /^\/[A-Za-z?][\w-]*(?:[:+-].*)?$/s;

export function screenInterpreter(s: Interpreter, args: readonly string[], ctx: ScreenContext, lead = ''): string | null {
  // How many coming positional arguments are option values rather than the script: `certain`
  // for options known to take one, `unsure` for options of unknown arity. Only positionals pay
  // them off; an option-looking argument is screened as an option either way, so the counts can
  // only make the scan go further (stricter), never stop early at a value.
  let certain = 0;
  let unsure = 0;
  let unsurePaid = 0;
  let positionals = 0;
  const code = s.stdinCode;
  const seen: StdinSeen = { given: false, safe: false, info: false };
  const stdin = (a: string) => inlineDenied(a, ctx, FROM_STDIN);
  /** An option's value: a script option's value is the script (or stdin); then the option's own value check. */
  const value = (opt: string, v: string | undefined, shown: string): string | null => {
    if (v === undefined) return null;
    if (code?.scriptOptions?.includes(opt)) {
      if (STDIN.test(v)) return stdin(shown);
      if (!v.startsWith('-')) seen.given = true;
    }
    const bad = s.valueCheck?.(opt, v);
    return bad ? inlineDenied(shown, ctx, bad) : null;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (s.dataUrls && /^data:|=data:/i.test(a)) return inlineDenied(a, ctx, 'it runs code from a data: URL');
    if (STDIN.test(a) || s.stdinOptions?.includes(a)) return stdin(a);
    if (s.endOptions?.includes(a)) break;
    if (code?.safe?.includes(a)) seen.safe = true;
    if (INFO.has(a) || s.standalone?.test(a)) seen.info = true;
    if (a === '--') {
      if (!s.stopAtScript || certain + unsure > 0) continue;
      const script = args[i + 1];
      if (script === undefined) break;
      if (STDIN.test(script)) return stdin(script);
      if (!code?.script || code.script.test(script)) positionals++;
      break;
    }
    const long = longOption(a);
    if (long) {
      const name = s.underscores ? long.name.replace(/_/g, '-') : long.name;
      if (s.inlineLong?.includes(name)) return inlineDenied(a, ctx);
      if (s.valuesAttached) continue;
      if (long.value !== undefined) {
        const bad = value(`--${name}`, long.value, a);
        if (bad) return bad;
      } else {
        const valued = s.valuedLong?.includes(name);
        // A value check also looks at the next argument of an option it does not know to take one.
        const bad = valued || s.valueCheck ? value(`--${name}`, args[i + 1], `${a} ${args[i + 1]}`) : null;
        if (bad) return bad;
        if (valued) certain++;
        else if (!s.flagLong?.includes(name) && !name.startsWith('no-')) unsure++;
      }
      continue;
    }
    if (s.inlineWord && a.startsWith('-') && s.inlineWord.includes(a.slice(1))) return inlineDenied(a, ctx);
    if (s.slashOptions && SLASH_OPTION.test(a)) continue;
    const cluster = shortCluster(a) ?? (s.plusOptions && /^\+[A-Za-z]/.test(a) ? a.slice(1) : null);
    if (cluster !== null) {
      if (s.valuesAttached) continue;
      if (s.wordOptions) {
        if (s.valuedWord?.includes(cluster)) {
          const bad = value(a, args[i + 1], `${a} ${args[i + 1]}`);
          if (bad) return bad;
          certain++;
        } else if (!s.flagWord?.test(a)) unsure++; // arity unknown
        continue;
      }
      for (let j = 0; j < cluster.length; j++) {
        const c = cluster[j];
        if (s.inlineShort.includes(c)) return inlineDenied(a, ctx);
        if (s.valuedShort.includes(c)) {
          // getopt style: the rest of the cluster is the value, else the next argument is.
          const attached = cluster.slice(j + 1);
          const bad = value(`-${c}`, attached !== '' ? attached : args[i + 1], attached !== '' ? a : `${a} ${args[i + 1]}`);
          if (bad) return bad;
          if (s.endShort?.includes(c)) return null;
          if (attached === '') certain++;
          break;
        }
        if (s.nextArgShort?.includes(c)) {
          certain++;
          continue;
        }
        if (s.digitsShort?.includes(c)) {
          while (j + 1 < cluster.length && /[0-9a-fA-Fx]/.test(cluster[j + 1]) && !s.inlineShort.includes(cluster[j + 1])) j++;
          continue;
        }
        if (!s.flagShort.includes(c) && j === cluster.length - 1) unsure++;
      }
      continue;
    }
    // A positional argument.
    if (s.plusInline && /^\+\D/.test(a)) return inlineDenied(a, ctx, 'it runs an editor command');
    if (positionals === 0 && s.inlineSubcommands?.includes(a)) return inlineDenied(a, ctx);
    if (certain > 0) {
      certain--;
      continue;
    }
    if (unsure > 0) {
      unsure--;
      unsurePaid++;
      continue;
    }
    // Not the script (R's ignored arguments, ocaml's object files): options may still follow.
    if (code?.script && !code.script.test(a)) continue;
    positionals++;
    if (s.stopAtScript) break;
  }
  // When an option of unknown arity may have taken the script as its value, give it the benefit
  // unless the entry is strict (its option list is complete enough that the doubt favours stdin).
  if (positionals > 0 || (unsurePaid > 0 && !code?.strict)) seen.given = true;
  return stdinCodeReason(code, seen, [lead, ...args].filter(Boolean).join(' '), ctx);
}
