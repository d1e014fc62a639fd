/** `gatehouse scripts push|list|versions|show|rm`: the team's script library, which `run_script {"name"}` runs. */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { SCRIPT_NAME_PATTERN, SCRIPT_NAME_RULE } from '../src/contracts/scripts.ts';
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { text, when, type Row } from './fields.ts';
import { info, out, printJson, table } from './io.ts';
import { visible } from './visible-text.ts';

const PUSH_FLAGS: FlagSpecs = {
  name: { type: 'string', value: 'name', help: `the script's name (default: the file's name without its extension); ${SCRIPT_NAME_RULE}` },
};
const VERSION_FLAGS: FlagSpecs = { version: { type: 'string', value: 'N', help: 'one version (default: the newest; for rm: every version)' } };

const SCRIPTS_HELP = `gatehouse scripts — the team's script library (run_script {"name": …, "vars": {…}} runs one)

usage:
  gatehouse scripts push <file> [--name n]        store the file as the script's next version (same text: no new version)
  gatehouse scripts list                          every script with its newest version
  gatehouse scripts versions <name>               a script's versions, newest first
  gatehouse scripts show <name> [--version N]     print a version's source to stdout (what it is on stderr)
  gatehouse scripts rm <name> [--version N]       remove a script, or one version of it`;

const help = (usage: string, specs: FlagSpecs) => out(`${usage}\n\nflags:\n${formatFlags(specs)}`);

export async function scriptsCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'push':
      return push(rest);
    case 'list':
      return list(rest);
    case 'versions':
      return versions(rest);
    case 'show':
      return show(rest);
    case 'rm':
      return rm(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(SCRIPTS_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown scripts command "${sub}"; allowed: push, list, versions, show, rm`);
  }
}

function one(a: { positionals: string[]; rest: string[] }, usage: string): string {
  const xs = [...a.positionals, ...a.rest];
  if (xs.length !== 1) throw new UsageError(`usage: ${usage}`);
  return xs[0]!;
}

function scriptName(name: string): string {
  if (!SCRIPT_NAME_PATTERN.test(name)) throw new UsageError(`script name "${visible(name)}" is not allowed: ${SCRIPT_NAME_RULE}`);
  return name;
}

function versionQuery(flags: Record<string, unknown>): string {
  if (flags.version === undefined) return '';
  const v = String(flags.version);
  if (!/^[1-9]\d{0,8}$/.test(v)) throw new UsageError(`--version "${visible(v)}" must be a positive integer`);
  return `?version=${v}`;
}

const describe = (x: Row) =>
  `${text(x.name)} version ${text(x.version)}: ${text(x.bytes)} bytes, sha256 ${text(x.sha256)}, pushed by ${text(x.createdBy)} at ${when(x.createdAt)}`;

async function push(argv: string[]): Promise<number> {
  const a = parseArgs(argv, PUSH_FLAGS, 'scripts push');
  if (a.flags.help) return (help('usage: gatehouse scripts push <file> [--name n]', PUSH_FLAGS), 0);
  const file = one(a, 'gatehouse scripts push <file> [--name n]');
  const name = scriptName(a.flags.name !== undefined ? String(a.flags.name) : basename(file).replace(/\.(ts|mts|js|mjs)$/, ''));
  let source: string;
  try {
    source = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const r = await api<{ version: Row; created: boolean }>(connection(a.flags), 'POST', '/scripts', { name, source });
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`${r.value.created ? 'pushed' : 'unchanged (same text as the newest version)'}: ${describe(r.value.version)}`);
  return 0;
}

async function list(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'scripts list');
  if (a.flags.help) return (help('usage: gatehouse scripts list', {}), 0);
  if (a.positionals.length || a.rest.length) throw new UsageError('scripts list takes no arguments');
  const r = await api<{ scripts: Row[] }>(connection(a.flags), 'GET', '/scripts');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  if (!r.value.scripts.length) return (info('no scripts (gatehouse scripts push <file> adds one)'), 0);
  out(
    table([
      ['NAME', 'VERSION', 'VERSIONS', 'BYTES', 'PUSHED', 'BY'],
      ...r.value.scripts.map((x) => [text(x.name), text(x.version), text(x.versions), text(x.bytes), when(x.createdAt), text(x.createdBy)]),
    ]),
  );
  return 0;
}

async function versions(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'scripts versions');
  if (a.flags.help) return (help('usage: gatehouse scripts versions <name>', {}), 0);
  const name = scriptName(one(a, 'gatehouse scripts versions <name>'));
  const r = await api<{ versions: Row[] }>(connection(a.flags), 'GET', `/scripts/${name}/versions`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(
    table([
      ['VERSION', 'BYTES', 'SHA256', 'PUSHED', 'BY'],
      ...r.value.versions.map((x) => [text(x.version), text(x.bytes), text(x.sha256).slice(0, 16), when(x.createdAt), text(x.createdBy)]),
    ]),
  );
  return 0;
}

async function show(argv: string[]): Promise<number> {
  const a = parseArgs(argv, VERSION_FLAGS, 'scripts show');
  if (a.flags.help) return (help('usage: gatehouse scripts show <name> [--version N]', VERSION_FLAGS), 0);
  const name = scriptName(one(a, 'gatehouse scripts show <name> [--version N]'));
  const r = await api<Row & { source: string }>(connection(a.flags), 'GET', `/scripts/${name}${versionQuery(a.flags)}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  // The source as stored, byte for byte: `show x > x.ts` gives back what was pushed.
  process.stdout.write(r.value.source);
  info(describe(r.value));
  return 0;
}

async function rm(argv: string[]): Promise<number> {
  const a = parseArgs(argv, VERSION_FLAGS, 'scripts rm');
  if (a.flags.help) return (help('usage: gatehouse scripts rm <name> [--version N]', VERSION_FLAGS), 0);
  const name = scriptName(one(a, 'gatehouse scripts rm <name> [--version N]'));
  const r = await api<{ removed: number }>(connection(a.flags), 'DELETE', `/scripts/${name}${versionQuery(a.flags)}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`removed ${name}${a.flags.version !== undefined ? ` version ${a.flags.version}` : ''} (${r.value.removed} version${r.value.removed === 1 ? '' : 's'})`);
  return 0;
}
