/**
 * Argument parsing for every CLI command, on Node's own `util.parseArgs`: each command declares
 * its flags; anything else is a usage error that lists what is allowed (exit 2).
 * `--flag value`, `--flag=value`, repeatable flags, `-h`, and `--` (everything after it is kept apart).
 */
import { parseArgs as nodeParseArgs } from 'node:util';

interface FlagSpec {
  /** string (takes a value), list (repeatable value), bool (no value). */
  type: 'string' | 'list' | 'bool';
  help: string;
  /** Placeholder for the value in help text. */
  value?: string;
}
export type FlagSpecs = Record<string, FlagSpec>;

export interface Parsed {
  flags: Record<string, string | string[] | boolean | undefined>;
  positionals: string[];
  /** Everything after `--`. */
  rest: string[];
  sawDoubleDash: boolean;
}

export class UsageError extends Error {
  readonly code = 'usage';
}

/** Flags every admin command takes. */
export const GLOBAL_FLAGS: FlagSpecs = {
  url: { type: 'string', value: 'URL', help: 'gateway URL (default: $GATEHOUSE_URL)' },
  token: { type: 'string', value: 'JWT', help: 'admin token (default: $GATEHOUSE_ADMIN_TOKEN)' },
  team: { type: 'string', value: 'team', help: "team to act on (must be the admin token's team; default: that team)" },
  json: { type: 'bool', help: 'print the raw JSON answer' },
  help: { type: 'bool', help: 'show this help' },
};

type NodeOptions = Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }>;

/**
 * Parses `argv` for the command named `where`. `withGlobal: false` for commands that do not talk
 * to the admin API (they still take --help and --json).
 */
export function parseArgs(argv: string[], specs: FlagSpecs, where: string, withGlobal = true): Parsed {
  const all: FlagSpecs = { ...(withGlobal ? GLOBAL_FLAGS : { json: GLOBAL_FLAGS.json, help: GLOBAL_FLAGS.help }), ...specs };
  const options: NodeOptions = {};
  for (const [name, s] of Object.entries(all)) {
    options[name] = {
      type: s.type === 'bool' ? 'boolean' : 'string',
      ...(s.type === 'list' ? { multiple: true } : {}),
      ...(name === 'help' ? { short: 'h' } : {}),
    };
  }
  // strict: false so that an unknown flag reaches us as a token and gets our message (with the allowed list).
  const { tokens } = nodeParseArgs({ args: argv, options, strict: false, allowPositionals: true, tokens: true });
  const flags: Parsed['flags'] = {};
  const positionals: string[] = [];
  const rest: string[] = [];
  let sawDoubleDash = false;
  for (const t of tokens) {
    if (t.kind === 'option-terminator') {
      sawDoubleDash = true;
      continue;
    }
    if (t.kind === 'positional') {
      (sawDoubleDash ? rest : positionals).push(t.value);
      continue;
    }
    const spec = all[t.name];
    if (!spec) {
      // Ids minted by the gateway or the OAuth library may start with "-": say how to pass one.
      const hint = t.rawName.startsWith('--') ? '' : ` (a value that starts with "-" goes after "--", e.g. gatehouse ${where} -- ${argv[t.index]})`;
      throw new UsageError(`unknown flag "${t.rawName}" for "${where}"; allowed: ${flagList(all)}${hint}`);
    }
    if (spec.type === 'bool') {
      if (t.value !== undefined) throw new UsageError(`--${t.name} takes no value`);
      flags[t.name] = true;
      continue;
    }
    if (t.value === undefined) throw new UsageError(`--${t.name} needs a value (${spec.value ?? 'value'})`);
    if (spec.type === 'list') flags[t.name] = [...((flags[t.name] as string[] | undefined) ?? []), t.value];
    else flags[t.name] = t.value;
  }
  return { flags, positionals, rest, sawDoubleDash };
}

const flagList = (specs: FlagSpecs) =>
  Object.keys(specs)
    .map((k) => `--${k}`)
    .join(', ');

export function formatFlags(specs: FlagSpecs, withGlobal = true): string {
  const all = withGlobal ? { ...specs, ...GLOBAL_FLAGS } : specs;
  const rows = Object.entries(all).map(([k, s]) => [
    `--${k}${s.type === 'bool' ? '' : ` <${s.value ?? 'value'}>`}${s.type === 'list' ? ' (repeatable)' : ''}`,
    s.help,
  ]);
  if (!rows.length) return '';
  const w = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([a, b]) => `  ${a.padEnd(w)}  ${b}`).join('\n');
}

/** "30d", "12h", "90m", "45s", "3600" (seconds) → seconds. */
export function parseDuration(s: string): number | null {
  const m = /^(\d+)\s*(s|sec|m|min|h|d|w|y)?$/i.exec(s.trim());
  if (!m) return null;
  const n = Number(m[1]);
  const unit = (m[2] ?? 's').toLowerCase();
  const mult: Record<string, number> = { s: 1, sec: 1, m: 60, min: 60, h: 3600, d: 86400, w: 7 * 86400, y: 365 * 86400 };
  return n * mult[unit];
}
