/**
 * A command string with no shell syntax — words, spaces and quotes only — means the same thing
 * with or without a shell, so it is split into argv and decided (and run) as argv: `ls -la` or
 * `git status` work under a policy without shell strings. Anything a shell would expand or
 * interpret (`$`, backticks, globs, redirections, `;|&`, newlines, `~`, `#`, backslashes,
 * braces, parentheses, assignments, reserved words) keeps it a shell string.
 */

/** Characters with a meaning to sh outside quotes. */
const SPECIAL = /[$`\\;&|<>(){}*?[\]~#\n\r!]/;
/** Inside double quotes, sh still expands `$`, backticks and `\`. */
const SPECIAL_IN_DOUBLE = /[$`\\!]/;
const RESERVED = new Set([
  'if',
  'then',
  'else',
  'elif',
  'fi',
  'do',
  'done',
  'case',
  'esac',
  'while',
  'until',
  'for',
  'in',
  'function',
  'select',
  'time',
  '!',
  '{',
  '}',
  '[[',
  ']]',
]);

/** The argv a shell would build from `command`, or null if it has any shell syntax. */
export function splitSimpleCommand(command: string): string[] | null {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < command.length; i++) {
    const c = command[i];
    if (c === ' ' || c === '\t') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
      continue;
    }
    if (c === "'") {
      const end = command.indexOf("'", i + 1);
      if (end < 0) return null;
      word += command.slice(i + 1, end);
      if (/[\n\r]/.test(command.slice(i + 1, end))) return null;
      i = end;
      inWord = true;
      continue;
    }
    if (c === '"') {
      const end = command.indexOf('"', i + 1);
      if (end < 0) return null;
      const inner = command.slice(i + 1, end);
      if (SPECIAL_IN_DOUBLE.test(inner) || /[\n\r]/.test(inner)) return null;
      word += inner;
      i = end;
      inWord = true;
      continue;
    }
    if (SPECIAL.test(c) || c.charCodeAt(0) < 0x20 || c === '\u007f') return null;
    word += c;
    inWord = true;
  }
  if (inWord) words.push(word);
  if (words.length === 0) return null;
  const first = command.trimStart();
  // `A=1 cmd` is an assignment; a reserved word starts a compound command.
  if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(first) || RESERVED.has(first.split(/[ \t]/)[0])) return null;
  if (words[0] === '') return null;
  return words;
}
