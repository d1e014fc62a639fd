/**
 * sed: the `e` command and the `s///e` flag run shell commands; `w`/`W` and `s///w` write files
 * (except /dev/stdout and /dev/stderr), and a script written that way could later be run with
 * `-f`. Scripts are parsed command by command (addresses, `s` delimiters, `y`, labels, text
 * arguments), and a script the parser cannot follow is refused rather than guessed at.
 * `-f`/`--file` scripts are refused: the policy cannot see what they contain.
 */
import { argDenied, type Screen } from './common.ts';
import { isLong, longOption, shortCluster } from './options.ts';

const WRITE_OK = new Set(['/dev/stdout', '/dev/stderr']);

export const screenSed: Screen = (args, ctx) => {
  const no = (a: string, why: string) => argDenied(a, ctx.base, why);
  const scripts: { arg: string; text: string }[] = [];
  let sawScriptOption = false;
  let firstOperand: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') {
      if (firstOperand === undefined) firstOperand = args[i + 1];
      break;
    }
    if (isLong(a, 'expression', { abbrev: true })) {
      const v = longOption(a)!.value ?? args[++i];
      if (v === undefined) return null;
      scripts.push({ arg: a, text: v });
      sawScriptOption = true;
      continue;
    }
    if (isLong(a, 'file', { abbrev: true })) return no(a, 'it reads a script the policy cannot screen; pass the script inline');
    if (isLong(a, 'line-length', { abbrev: true }) && longOption(a)!.value === undefined) {
      i++;
      continue;
    }
    if (a.startsWith('--')) continue;
    const cluster = shortCluster(a);
    if (cluster) {
      for (let j = 0; j < cluster.length; j++) {
        const c = cluster[j];
        if (c === 'e') {
          const v = j + 1 < cluster.length ? cluster.slice(j + 1) : args[++i];
          if (v !== undefined) scripts.push({ arg: a, text: v });
          sawScriptOption = true;
          break;
        }
        if (c === 'f') return no(a, 'it reads a script the policy cannot screen; pass the script inline');
        if (c === 'l') {
          if (j + 1 === cluster.length) i++;
          break;
        }
        if (c === 'i') break; // -i[SUFFIX]: the rest of the cluster is the suffix
      }
      continue;
    }
    if (firstOperand === undefined) firstOperand = a;
  }
  if (!sawScriptOption && firstOperand !== undefined) scripts.push({ arg: firstOperand, text: firstOperand });
  for (const s of scripts) {
    const why = sedScriptProblem(s.text);
    if (why) return no(s.arg, why);
  }
  return null;
};

/** Null if the script neither runs commands nor writes files; else why it is refused. */
export function sedScriptProblem(script: string): string | null {
  const p = new SedParser(script);
  try {
    return p.run();
  } catch (e) {
    return `the script could not be screened (${e instanceof Error ? e.message : String(e)})`;
  }
}

class SedParser {
  private i = 0;
  private readonly script: string;
  constructor(s: string) {
    this.script = s;
  }

  run(): string | null {
    const s = this.script;
    while (this.i < s.length) {
      this.skip(' \t\n;');
      if (this.i >= s.length) break;
      if (s[this.i] === '#') {
        this.toEol();
        continue;
      }
      this.address();
      this.skip(' \t');
      if (s[this.i] === ',') {
        this.i++;
        this.skip(' \t');
        this.address();
      }
      this.skip(' \t');
      while (s[this.i] === '!') {
        this.i++;
        this.skip(' \t');
      }
      const cmd = s[this.i++];
      if (cmd === undefined) throw new Error('address without a command');
      const why = this.command(cmd);
      if (why) return why;
    }
    return null;
  }

  private command(cmd: string): string | null {
    const s = this.script;
    switch (cmd) {
      case '{':
      case '}':
      case '=':
      case 'd':
      case 'D':
      case 'g':
      case 'G':
      case 'h':
      case 'H':
      case 'n':
      case 'N':
      case 'p':
      case 'P':
      case 'x':
      case 'z':
      case 'F':
        return null;
      case 'e':
        return 'the e command runs a shell command';
      case 'w':
      case 'W': {
        const file = this.toEol().trim();
        return WRITE_OK.has(file) ? null : `the ${cmd} command writes to a file`;
      }
      case 'r':
      case 'R':
        this.toEol();
        return null;
      case 'a':
      case 'i':
      case 'c':
        this.text();
        return null;
      case ':':
      case 'b':
      case 't':
      case 'T':
        // Labels end at whitespace or ';' here even where GNU sed reads further: whatever
        // follows is then parsed as commands, which can only make the screen stricter.
        this.skip(' \t');
        while (this.i < s.length && !/[\s;]/.test(s[this.i])) this.i++;
        return null;
      case 'q':
      case 'Q':
      case 'l':
      case 'L':
        this.skip(' \t');
        while (/[0-9]/.test(s[this.i] ?? '')) this.i++;
        return null;
      case 'v':
        this.skip(' \t');
        while (this.i < s.length && !/[\s;}]/.test(s[this.i])) this.i++;
        return null;
      case 'y': {
        const d = this.delimiter();
        this.until(d);
        this.until(d);
        return null;
      }
      case 's': {
        const d = this.delimiter();
        this.until(d, true);
        this.until(d);
        while (this.i < s.length) {
          const f = s[this.i];
          if (f === 'e') return 'the s///e flag runs the pattern space as a shell command';
          if (f === 'w') {
            this.i++;
            const file = this.toEol().trim();
            return WRITE_OK.has(file) ? null : 'the s///w flag writes to a file';
          }
          if (/[gpiImM0-9]/.test(f)) {
            this.i++;
            continue;
          }
          break;
        }
        return null;
      }
      default:
        throw new Error(`unknown command "${cmd}"`);
    }
  }

  private address(): void {
    const s = this.script;
    const c = s[this.i];
    if (c === undefined) return;
    if (/[0-9]/.test(c)) {
      while (/[0-9~]/.test(s[this.i] ?? '')) this.i++;
    } else if (c === '$') {
      this.i++;
    } else if (c === '/') {
      this.i++;
      this.until('/', true);
      while (/[IM]/.test(s[this.i] ?? '')) this.i++;
    } else if (c === '\\') {
      this.i++;
      const d = s[this.i++];
      if (d === undefined) throw new Error('unterminated address');
      this.until(d, true);
      while (/[IM]/.test(s[this.i] ?? '')) this.i++;
    } else if (c === '+' || c === '~') {
      this.i++;
      while (/[0-9]/.test(s[this.i] ?? '')) this.i++;
    }
  }

  private delimiter(): string {
    const d = this.script[this.i++];
    if (d === undefined || d === '\n' || d === '\\') throw new Error('bad delimiter');
    return d;
  }

  /**
   * Consumes up to and including the first unescaped delimiter. In a regex, GNU sed (4.9, as
   * checked against the real binary) lets a bracket expression hold the delimiter: `s/[/]/x/`.
   */
  private until(d: string, regex = false): void {
    const s = this.script;
    while (this.i < s.length) {
      const c = s[this.i++];
      if (c === '\\') {
        this.i++;
        continue;
      }
      if (regex && c === '[') {
        // `]` first (after an optional `^`) is literal; `[:alpha:]`-style classes may hold `]`.
        if (s[this.i] === '^') this.i++;
        if (s[this.i] === ']') this.i++;
        while (this.i < s.length && s[this.i] !== ']') {
          if (s[this.i] === '[' && /[.:=]/.test(s[this.i + 1] ?? '')) {
            const close = s.indexOf(`${s[this.i + 1]}]`, this.i + 2);
            if (close < 0) throw new Error('unterminated bracket expression');
            this.i = close + 2;
            continue;
          }
          this.i++;
        }
        if (this.i >= s.length) throw new Error('unterminated bracket expression');
        this.i++;
        continue;
      }
      if (c === d) return;
    }
    throw new Error('unterminated regex or replacement');
  }

  /** a/i/c text: to the end of the line, following backslash-newline continuations. */
  private text(): void {
    const s = this.script;
    while (this.i < s.length) {
      const c = s[this.i++];
      if (c === '\\') {
        this.i++;
        continue;
      }
      if (c === '\n') return;
    }
  }

  private toEol(): string {
    const start = this.i;
    const nl = this.script.indexOf('\n', this.i);
    this.i = nl < 0 ? this.script.length : nl + 1;
    return this.script.slice(start, nl < 0 ? this.script.length : nl);
  }

  private skip(chars: string): void {
    while (this.i < this.script.length && chars.includes(this.script[this.i])) this.i++;
  }
}
