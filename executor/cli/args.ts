/**
 * A small, strict argv parser: every command declares its flags; anything else is a usage error
 * that lists what is allowed (exit 2). `--flag value`, `--flag=value`, repeatable flags, and `--`.
 */
export interface FlagSpec {
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

/** Flags every command takes. */
export const GLOBAL_FLAGS: FlagSpecs = {
  url: { type: 'string', value: 'URL', help: 'gateway URL (default: $GATEHOUSE_URL)' },
  token: { type: 'string', value: 'JWT', help: 'admin token (default: $GATEHOUSE_ADMIN_TOKEN)' },
  team: { type: 'string', value: 'team', help: "team to act on (must be the admin token's team; default: that team)" },
  json: { type: 'bool', help: 'print the raw JSON answer' },
  help: { type: 'bool', help: 'show this help' },
};

export function parseArgs(argv: string[], specs: FlagSpecs, where: string): Parsed {
  const all: FlagSpecs = { ...GLOBAL_FLAGS, ...specs };
  const flags: Parsed['flags'] = {};
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') return { flags, positionals, rest: argv.slice(i + 1), sawDoubleDash: true };
    if (a === '-h') { flags.help = true; continue; }
    if (!a.startsWith('--') || a === '-') {
      if (a.startsWith('-') && a !== '-') throw new UsageError(`unknown flag "${a}" for "${where}"; allowed: ${flagList(all)}`);
      positionals.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = a.slice(2, eq === -1 ? undefined : eq);
    const spec = all[name];
    if (!spec) throw new UsageError(`unknown flag "--${name}" for "${where}"; allowed: ${flagList(all)}`);
    if (spec.type === 'bool') {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
      continue;
    }
    let value: string;
    if (eq !== -1) value = a.slice(eq + 1);
    else {
      if (i + 1 >= argv.length) throw new UsageError(`--${name} needs a value (${spec.value ?? 'value'})`);
      value = argv[++i];
    }
    if (spec.type === 'list') flags[name] = [...((flags[name] as string[] | undefined) ?? []), value];
    else flags[name] = value;
  }
  return { flags, positionals, rest: [], sawDoubleDash: false };
}

export const flagList = (specs: FlagSpecs) => Object.keys(specs).map((k) => `--${k}`).join(', ');

export function formatFlags(specs: FlagSpecs, withGlobal = true): string {
  const all = withGlobal ? { ...specs, ...GLOBAL_FLAGS } : specs;
  const rows = Object.entries(all).map(([k, s]) => [`--${k}${s.type === 'bool' ? '' : ` <${s.value ?? 'value'}>`}${s.type === 'list' ? ' (repeatable)' : ''}`, s.help]);
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
