/**
 * How text from users (a command, its arguments, a cwd, a token subject, a reason, a note) looks
 * wherever Gatehouse shows it to a person: the CLI prints it in a terminal and the dashboard embeds
 * this very function (`src/dashboard/client/core.ts` serves its source), so both show the same.
 */

/**
 * `text` with every character a terminal or a browser would act on instead of showing written as a
 * visible escape: C0 controls, DEL and C1 controls (an ESC or 0x9b starts a sequence that moves the
 * cursor, erases or hides text), bidirectional embeddings, overrides, isolates and marks (they
 * reorder what follows), zero-width and other invisible format characters, line and paragraph
 * separators, spaces other than U+0020, and lone surrogates. `\n`, `\r` and `\t` keep their short
 * names; the rest is `\xHH`, `\uHHHH` or `\u{HHHHH}`. Printed text therefore stays on one line and
 * in the order it was sent.
 *
 * With `asWord`, the result is one shell-like token: bare when it is a plain word
 * (`[A-Za-z0-9_@%+=:,./-]+`), else in double quotes with `\` and `"` escaped too, so where one
 * argument ends and what each character was can always be read back.
 *
 * With `keepLines`, `\n` and `\t` stay as they are, for text shown as several lines (a job's
 * output, an error message with line breaks); `\r` and everything else is still escaped.
 *
 * Self-contained on purpose (no imports, no outer names, no inner functions a bundler could wrap):
 * the dashboard serves its source text.
 */
export function visible(text: string, asWord?: boolean, keepLines?: boolean): string {
  // biome-ignore lint/suspicious/noMisleadingCharacterClass: each code point is listed alone on purpose (invisible or joining characters to show as escapes)
  const hidden = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\u00a0\u034f\u115f\u1160\u1680\u2000-\u200a\u202f\u205f\u3000\u3164\ufe00-\ufe0f\uffa0\u{e0100}-\u{e01ef}]/u;
  const named: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
  const plain = /^[\w@%+=:,./-]+$/;
  if (asWord && plain.test(text)) return text;
  let out = '';
  for (const ch of text) {
    if (asWord && (ch === '\\' || ch === '"')) out += '\\' + ch;
    else if (!hidden.test(ch) || (keepLines && (ch === '\n' || ch === '\t'))) out += ch;
    else if (named[ch]) out += named[ch];
    else {
      const cp = ch.codePointAt(0) as number;
      const hex = cp.toString(16);
      out += cp < 0x100 ? '\\x' + hex.padStart(2, '0') : cp < 0x10000 ? '\\u' + hex.padStart(4, '0') : '\\u{' + hex + '}';
    }
  }
  return asWord ? '"' + out + '"' : out;
}
