/**
 * Text from users is data in a terminal: every CLI renderer prints a gateway field that a caller,
 * an agent or another admin chose (command, arguments, cwd, subject, reason, note, rule text)
 * through `visible`, so no escape sequence or bidirectional control reaches the terminal and an
 * audit row is one line. The rule itself lives in `src/contracts/visible-text.ts`, shared with
 * the dashboard.
 */
import { visible } from '../src/contracts/visible-text.ts';

export { visible };

/**
 * A stored command as one line: `[runtime] executable arg…`, each argv element a token (quoted
 * when it is not a plain word); a shell string as is when nothing in it needs escaping, else quoted
 * like an argument. Anything else (another tool's request) as visible JSON.
 */
export function formatCommand(c: unknown): string {
  if (c === null || c === undefined) return '';
  if (typeof c === 'string') return visible(c);
  const o = c as { mode?: unknown; command?: unknown; args?: unknown; runtime?: unknown };
  if (typeof o.command === 'string') {
    const shell = o.mode === 'shell' || !Array.isArray(o.args);
    const args = Array.isArray(o.args) ? o.args.map((x) => visible(String(x), true)) : [];
    const shown = shell ? shellString(o.command) : visible(o.command, true);
    return `${o.runtime ? `[${visible(String(o.runtime))}] ` : ''}${[shown, ...args].join(' ')}`;
  }
  return visible(JSON.stringify(c));
}

/** A shell string reads best bare; quoted once it holds a backslash or anything `visible` escapes (so `\n` is unambiguous). */
const shellString = (s: string) => (s && !s.includes('\\') && visible(s) === s ? s : visible(s, true));

/**
 * JSON for a terminal: the same document (a JSON parser reads the same values), with each
 * character `visible` would escape written as a JSON `\u` escape. JSON.stringify leaves DEL, C1,
 * bidi controls and U+2028 raw.
 */
export function visibleJson(v: unknown, indent?: number): string {
  return JSON.stringify(v, null, indent).replace(/[^\x20-\x7e\n]/gu, (ch) => {
    if (visible(ch) === ch) return ch;
    let units = '';
    for (let i = 0; i < ch.length; i++) units += `\\u${ch.charCodeAt(i).toString(16).padStart(4, '0')}`;
    return units;
  });
}
