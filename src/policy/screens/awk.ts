/**
 * awk family: programs that call `system()`, open pipes (`print | "cmd"`, `"cmd" | getline`,
 * gawk's `|&` coprocesses), or load code (`@load`, `@include`, `-l`, `-i`, `-f`, `-E`) are
 * refused. The pipe check looks at program text outside string and regex literals, so `/a|b/`
 * and `split(s, a, "|")` pass; `system` is refused wherever the word appears.
 */
import { argDenied, type Screen } from './common.ts';
import { longOption, shortCluster } from './options.ts';

/** Long options (gawk) and what they do with their value. */
const LONG_PROGRAM = ['source'];
const LONG_FILE = ['file', 'exec', 'include', 'load'];
const LONG_VALUED = ['assign', 'field-separator'];

export const screenAwk: Screen = (args, ctx) => {
  const no = (a: string, why: string) => argDenied(a, ctx.base, why);
  const unseen = 'it runs a program file the policy cannot screen; pass the program inline';
  const programs: { arg: string; text: string }[] = [];
  let sawProgramOption = false;
  let operand: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') {
      operand ??= args[i + 1];
      break;
    }
    const long = longOption(a);
    if (long) {
      const match = (names: string[]) => names.find((n) => long.name !== '' && n.startsWith(long.name));
      if (match(LONG_FILE)) return no(a, unseen);
      if (match(LONG_PROGRAM)) {
        const v = long.value ?? args[++i];
        if (v !== undefined) programs.push({ arg: a, text: v });
        sawProgramOption = true;
        continue;
      }
      if (long.value === undefined && match(LONG_VALUED)) i++;
      continue;
    }
    const cluster = shortCluster(a);
    if (cluster) {
      const c = cluster[0];
      const attached = cluster.slice(1);
      const value = attached !== '' ? attached : args[i + 1];
      if ('fEil'.includes(c)) return no(a, unseen);
      if (c === 'e') {
        if (value !== undefined) programs.push({ arg: a, text: value });
        sawProgramOption = true;
        if (attached === '') i++;
        continue;
      }
      if (c === 'W') {
        // POSIX spelling of gawk's long options, and mawk's -W exec.
        const w = (value ?? '').split('=')[0];
        if (w !== '' && [...LONG_FILE, 'exec'].some((n) => n.startsWith(w))) return no(attached ? a : `${a} ${value}`, unseen);
        if (w !== '' && 'source'.startsWith(w)) programs.push({ arg: a, text: (value ?? '').slice(w.length + 1) });
        if (attached === '') i++;
        continue;
      }
      if ('vF'.includes(c) && attached === '') i++;
      continue;
    }
    // awk's options end at the first operand: the program (unless -e/--source gave one), then files.
    operand ??= a;
    break;
  }
  if (!sawProgramOption && operand !== undefined) programs.push({ arg: operand, text: operand });
  for (const p of programs) {
    const why = awkProgramProblem(p.text);
    if (why) return no(p.arg, why);
  }
  return null;
};

/** Null if the program neither runs commands nor loads code; else why it is refused. */
export function awkProgramProblem(program: string): string | null {
  if (/\bsystem\b/.test(program)) return 'system() runs a shell command';
  if (/@\s*(?:load|include)\b/.test(program)) return '@load and @include bring in code the policy cannot screen';
  const code = stripLiterals(program);
  if (code.includes('|&')) return '|& starts a coprocess command';
  if (/(?<!\|)\|(?!\|)/.test(code)) return 'a | pipe runs a shell command (print | "cmd" or "cmd" | getline)';
  if (/"\/inet/.test(program)) return 'it opens network connections';
  return null;
}

/**
 * The program with string and regex literals blanked out. A `/` opens a regex only where a
 * value cannot end (after an operator, `(`, `,`, `;`, `{`, a newline or `print`-like keyword);
 * elsewhere it is division, and the text after it stays visible to the pipe check.
 */
function stripLiterals(p: string): string {
  let out = '';
  let prev = ''; // the last significant token's text (or its last character)
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === '"') {
      i = skipQuoted(p, i, '"');
      out += '""';
      prev = '"';
      continue;
    }
    if (c === '#') {
      // A comment runs to the end of the line.
      while (i < p.length && p[i] !== '\n') i++;
      out += '\n';
      prev = '\n';
      continue;
    }
    if (c === '/' && regexMayStart(prev)) {
      i = skipRegex(p, i);
      out += '//';
      prev = '/';
      continue;
    }
    out += c;
    if (/\s/.test(c) && c !== '\n') continue;
    if (/[A-Za-z_0-9]/.test(c)) {
      let j = i;
      while (j + 1 < p.length && /[A-Za-z_0-9]/.test(p[j + 1])) j++;
      const word = p.slice(i, j + 1);
      out += word.slice(1);
      i = j;
      prev = /^(?:print|printf|return|in|case|getline|if|while|do|else|for|delete|exit)$/.test(word) ? '(' : 'a';
      continue;
    }
    if ((c === '+' || c === '-') && p[i + 1] === c) {
      out += c;
      i++;
      prev = 'a'; // x++ / y: the slash after a postfix increment divides
      continue;
    }
    prev = c;
  }
  return out;
}

function regexMayStart(prev: string): boolean {
  return prev === '' || /^[(,;{}!~&|?:=<>+\-*%^\n[]$/.test(prev);
}

function skipQuoted(p: string, i: number, q: string): number {
  for (let j = i + 1; j < p.length; j++) {
    if (p[j] === '\\') j++;
    else if (p[j] === q) return j;
  }
  return p.length;
}

function skipRegex(p: string, i: number): number {
  let inBracket = false;
  for (let j = i + 1; j < p.length; j++) {
    const c = p[j];
    if (c === '\\') j++;
    else if (inBracket) {
      if (c === ']') inBracket = false;
    } else if (c === '[') {
      inBracket = true;
      if (p[j + 1] === '^') j++;
      if (p[j + 1] === ']') j++;
    } else if (c === '/') return j;
    else if (c === '\n') return j; // awk regexes cannot span lines
  }
  return p.length;
}
