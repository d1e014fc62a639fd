/** `gatehouse policy get|set|check|presets|preset`. */
import { readFileSync } from 'node:fs';
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { info, iso, out, printJson } from './io.ts';
import { visible } from './visible-text.ts';

const POLICY_HELP = `gatehouse policy — the team policy

usage:
  gatehouse policy get                      print the policy document (JSON) to stdout; version on stderr
  gatehouse policy set <file.json|->        replace the policy (validated by the gateway; - reads stdin)
  gatehouse policy presets                  the presets (strict, standard, builds, open) and what each allows
  gatehouse policy preset <name>            replace the policy with a preset (a new version, like set)
  gatehouse policy check [--runtime r] [--cwd d] [--env K=V] [--timeout ms] -- <command> [args...]
  gatehouse policy check --shell "<shell string>"
                                            dry run: would the policy allow it, which stage decides, why
                                            (exit 0 allowed, 1 denied, 3 needs approval)`;

const CHECK_FLAGS: FlagSpecs = {
  runtime: { type: 'string', value: 'runtime', help: 'decide as runtime_execute for this runtime' },
  cwd: { type: 'string', value: 'dir', help: 'working directory, relative to the agent root' },
  env: { type: 'list', value: 'K=V', help: 'environment variable for the job' },
  timeout: { type: 'string', value: 'ms', help: 'requested timeout in milliseconds' },
  shell: { type: 'string', value: 'string', help: 'check a shell string (sh -c) instead of an argv' },
};

export async function policyCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'get':
      return get(rest);
    case 'set':
      return set(rest);
    case 'check':
      return check(rest);
    case 'presets':
      return presets(rest);
    case 'preset':
      return preset(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(POLICY_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown policy command "${sub}"; allowed: get, set, check, presets, preset`);
  }
}

type PolicyAnswer = { team: string; version: number; updatedAt: number | null; updatedBy: string | null; isDefault: boolean; policy: unknown };

const describe = (p: PolicyAnswer) =>
  p.isDefault
    ? `team ${p.team}: default policy (never set)`
    : `team ${p.team}: policy version ${p.version}, set by ${visible(String(p.updatedBy))} at ${iso(p.updatedAt)}`;

async function get(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'policy get');
  if (a.flags.help) return (out(`usage: gatehouse policy get [--json]\n\nflags:\n${formatFlags({})}`), 0);
  if (a.positionals.length) throw new UsageError('policy get takes no arguments');
  const r = await api<PolicyAnswer>(connection(a.flags), 'GET', '/policy');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  printJson(r.value.policy);
  info(describe(r.value));
  return 0;
}

function readInput(path: string): string {
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${path === '-' ? 'stdin' : path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

async function set(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'policy set');
  if (a.flags.help) return (out(`usage: gatehouse policy set <file.json|->\n\nflags:\n${formatFlags({})}`), 0);
  if (a.positionals.length !== 1) throw new UsageError('usage: gatehouse policy set <file.json|-> (one file; - reads stdin)');
  const conn = connection(a.flags);
  const text = readInput(a.positionals[0]);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    info(`error (invalid_argument): ${a.positionals[0]} is not valid JSON: ${(e as Error).message}`);
    return 1;
  }
  // `policy get --json` output is accepted too: take its .policy.
  if (doc && typeof doc === 'object' && 'policy' in doc && 'team' in doc) doc = (doc as { policy: unknown }).policy;
  const r = await api<PolicyAnswer>(conn, 'PUT', '/policy', doc);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`stored: ${describe(r.value)}`);
  return 0;
}

async function presets(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'policy presets');
  if (a.flags.help) return (out(`usage: gatehouse policy presets\n\nflags:\n${formatFlags({})}`), 0);
  if (a.positionals.length) throw new UsageError('policy presets takes no arguments');
  const r = await api<{ presets: { name: string; summary: string }[] }>(connection(a.flags), 'GET', '/policy/presets');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(r.value.presets.map((p) => `${p.name}\n  ${p.summary}`).join('\n\n'));
  return 0;
}

async function preset(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'policy preset');
  if (a.flags.help) return (out(`usage: gatehouse policy preset <name>   (see gatehouse policy presets)\n\nflags:\n${formatFlags({})}`), 0);
  if (a.positionals.length !== 1) throw new UsageError('usage: gatehouse policy preset <name> (one of the names gatehouse policy presets lists)');
  const r = await api<PolicyAnswer & { preset: string }>(connection(a.flags), 'PUT', `/policy/presets/${encodeURIComponent(a.positionals[0])}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`stored preset ${r.value.preset}: ${describe(r.value)}`);
  return 0;
}

async function check(argv: string[]): Promise<number> {
  const a = parseArgs(argv, CHECK_FLAGS, 'policy check');
  if (a.flags.help)
    return (
      out(
        `usage: gatehouse policy check [flags] -- <command> [args...]\n       gatehouse policy check --shell "<string>"\n\nflags:\n${formatFlags(CHECK_FLAGS)}`,
      ),
      0
    );
  const shell = a.flags.shell as string | undefined;
  const argvToCheck = [...a.positionals, ...a.rest];
  if (shell !== undefined && argvToCheck.length) throw new UsageError('give either --shell "<string>" or -- <command> [args...], not both');
  if (shell === undefined && !argvToCheck.length) throw new UsageError('nothing to check: pass -- <command> [args...] or --shell "<string>"');
  const env: Record<string, string> = {};
  for (const kv of (a.flags.env as string[] | undefined) ?? []) {
    const i = kv.indexOf('=');
    if (i < 1) throw new UsageError(`--env "${kv}" must be NAME=value`);
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  let timeout: number | undefined;
  if (a.flags.timeout !== undefined) {
    timeout = Number(a.flags.timeout);
    if (!Number.isInteger(timeout) || timeout <= 0) throw new UsageError(`--timeout "${a.flags.timeout}" must be a positive integer (milliseconds)`);
  }
  const body = {
    ...(shell !== undefined ? { command: shell } : { command: argvToCheck[0], args: argvToCheck.slice(1) }),
    ...(a.flags.runtime !== undefined ? { runtime: a.flags.runtime } : {}),
    ...(a.flags.cwd !== undefined ? { cwd: a.flags.cwd } : {}),
    ...(Object.keys(env).length ? { env } : {}),
    ...(timeout !== undefined ? { timeout_ms: timeout } : {}),
  };
  const r = await api<{ allowed: boolean; decision?: 'allow' | 'ask' | 'deny'; stage: string; reason: string; notes: string[]; networkLine?: string }>(
    connection(a.flags),
    'POST',
    '/policy/check',
    body,
  );
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) printJson(r.value);
  else {
    // The reason and notes quote the command and the policy's rule text.
    out(`${r.value.decision === 'ask' ? 'needs approval' : r.value.allowed ? 'allowed' : 'denied'} (${visible(r.value.stage)}): ${visible(r.value.reason)}`);
    for (const n of r.value.notes) out(`  note: ${visible(n)}`);
    // The network the command would get (docs/network.md).
    if (r.value.networkLine) for (const l of r.value.networkLine.split('\n')) out(`  ${visible(l)}`);
  }
  // 3: allowed once a person approves it (a rule decided `ask`).
  return r.value.allowed ? 0 : r.value.decision === 'ask' ? 3 : 1;
}
