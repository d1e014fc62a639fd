/**
 * Unknown keys are an error, never silently dropped: `{"command":"ls","arg":["-l"]}` must not
 * run `ls` as a shell string. The message names the valid keys and the one most likely meant.
 */
import { z } from 'zod';

/** Spellings people (and models) use for a key by another name. Only used when the target exists. */
const ALIASES: Record<string, string[]> = {
  arg: ['args'],
  argv: ['args'],
  arguments: ['args'],
  cmd: ['command'],
  exe: ['executable', 'command'],
  program: ['executable', 'command'],
  timeout: ['timeout_ms', 'timeoutMs'],
  timeoutMs: ['timeout_ms'],
  timeout_ms: ['timeoutMs'],
  timeout_seconds: ['timeout_ms', 'timeoutMs'],
  cwd: ['relativeCwd'],
  relativeCwd: ['cwd'],
  relative_cwd: ['relativeCwd', 'cwd'],
  workdir: ['cwd', 'relativeCwd'],
  dir: ['cwd', 'relativeCwd'],
  input: ['stdin'],
  environment: ['env'],
  lang: ['runtime'],
  language: ['runtime'],
  source: ['code'],
  script: ['code'],
  output_mode: ['outputMode'],
  query: ['queryTerms'],
  terms: ['queryTerms'],
  handle: ['artifactHandle'],
  artifact: ['artifactHandle'],
};

const norm = (s: string) => s.toLowerCase().replace(/[_-]/g, '');

function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
  }
  return d[a.length][b.length];
}

/** The valid key most likely meant by `key`, or null. */
function likelyKey(key: string, valid: readonly string[]): string | null {
  const alias = Object.hasOwn(ALIASES, key) ? ALIASES[key].find((k) => valid.includes(k)) : undefined;
  if (alias) return alias;
  const same = valid.find((v) => norm(v) === norm(key));
  if (same) return same;
  let best: { k: string; d: number } | null = null;
  for (const v of valid) {
    const d = distance(norm(key), norm(v));
    if (d <= Math.max(1, Math.floor(v.length / 3)) && (!best || d < best.d)) best = { k: v, d };
  }
  if (best) return best.k;
  return valid.find((v) => norm(v).startsWith(norm(key)) || norm(key).startsWith(norm(v))) ?? null;
}

export function unknownKeysMessage(keys: readonly string[], valid: readonly string[]): string {
  const parts = keys.map((k) => {
    const m = likelyKey(k, valid);
    return `"${k}"${m ? ` (did you mean "${m}"?)` : ''}`;
  });
  return `unknown ${keys.length === 1 ? 'key' : 'keys'} ${parts.join(', ')}; valid keys: ${valid.join(', ')}`;
}

/**
 * A strict object schema for tool arguments, with the message above for unknown keys. One per
 * shape: the MCP server is built per request, and building a zod schema costs more than a call.
 */
export function strictInput<S extends z.ZodRawShape>(shape: S) {
  const known = built.get(shape);
  if (known) return known as ReturnType<typeof build<S>>;
  const s = build(shape);
  built.set(shape, s);
  return s;
}

const built = new WeakMap<z.ZodRawShape, z.ZodType>();

function build<S extends z.ZodRawShape>(shape: S) {
  const valid = Object.keys(shape);
  return z.strictObject(shape, {
    error: (iss) => (iss.code === 'unrecognized_keys' ? unknownKeysMessage(iss.keys, valid) : undefined),
  });
}

/** snake_case ↔ camelCase of a key (`timeout_ms` ↔ `timeoutMs`). */
const toCamel = (k: string) => k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
const toSnake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
/** One concept named differently by two tools' reference contracts. */
const SAME_CONCEPT: Record<string, string> = { cwd: 'relativeCwd', relativeCwd: 'cwd' };

/**
 * The other spellings a tool accepts for its keys: every key in snake_case and camelCase (the
 * tools' reference contracts use both), and `cwd`/`relativeCwd` for each other. alias → key.
 */
function inputAliases(valid: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const k of valid) {
    const same = SAME_CONCEPT[k];
    for (const alt of [toCamel(k), toSnake(k), ...(same ? [same, toCamel(same), toSnake(same)] : [])]) {
      if (alt !== k && !valid.includes(alt) && !out.has(alt)) out.set(alt, k);
    }
  }
  return out;
}

/**
 * A tool's input schema: strict like `strictInput`, and accepting each key's other spelling
 * (`inputAliases`) as the same argument — the handler sees the tool's own spelling, and clients see
 * only that one in the advertised JSON Schema. Both spellings of one key in a call are an error.
 */
export function toolInput<S extends z.ZodRawShape>(shape: S): z.ZodType<z.output<z.ZodObject<S>>, z.input<z.ZodObject<S>>> {
  const known = builtTool.get(shape);
  if (known) return known as never;
  const valid = Object.keys(shape);
  const aliases = inputAliases(valid);
  const canonical = build(shape);
  const accepting = z.preprocess((raw) => {
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw;
    const v = { ...(raw as Record<string, unknown>) };
    for (const [alias, key] of aliases) {
      if (!Object.hasOwn(v, alias)) continue;
      // Left as is: the strict schema then names both keys in its error.
      if (Object.hasOwn(v, key)) continue;
      v[key] = v[alias];
      delete v[alias];
    }
    return v;
  }, canonical);
  const both = z.custom<unknown>(
    (raw) => {
      if (!raw || typeof raw !== 'object') return true;
      return ![...aliases].some(([alias, key]) => Object.hasOwn(raw, alias) && Object.hasOwn(raw, key));
    },
    {
      error: (iss) => {
        const raw = iss.input as Record<string, unknown>;
        const pairs = [...aliases].filter(([alias, key]) => Object.hasOwn(raw, alias) && Object.hasOwn(raw, key));
        return pairs.map(([alias, key]) => `"${alias}" and "${key}" are the same argument; give one`).join('; ');
      },
    },
  );
  const schema = both.pipe(accepting);
  // Advertise the tool's own spelling only.
  const std = schema['~standard'] as unknown as Record<string, unknown>;
  const canonicalStd = canonical['~standard'] as unknown as { jsonSchema?: unknown };
  (schema as unknown as { '~standard': unknown })['~standard'] = { ...std, jsonSchema: canonicalStd.jsonSchema };
  builtTool.set(shape, schema);
  return schema as never;
}

const builtTool = new WeakMap<z.ZodRawShape, z.ZodType>();
