/**
 * `gatehouse secrets set|list|rm`: the team's secrets, which the agents' egress proxy adds to requests for the
 * hosts `network.credentials` binds them to (docs/credentials.md). A value is read from stdin or typed at a
 * prompt that does not echo — never from argv, where shell history and `ps` would keep it.
 */
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { SecretName } from '../src/contracts/network.ts';
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { text, when, type Row } from './fields.ts';
import { info, out, printJson, table } from './io.ts';
import { visible } from './visible-text.ts';

const SECRETS_HELP = `gatehouse secrets — the team's secrets, added by the agents' egress proxy to requests for the hosts
network.credentials binds them to; a job never sees a value (docs/credentials.md)

usage:
  gatehouse secrets set <name>      read the value from stdin (printf %s "$TOKEN" | gatehouse secrets set NAME), or a prompt
  gatehouse secrets list            names and dates (a value is never shown again)
  gatehouse secrets rm <name>       remove a secret: jobs started after this get no value for it`;

const help = (usage: string, specs: FlagSpecs) => out(`${usage}\n\nflags:\n${formatFlags(specs)}`);

export async function secretsCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'set':
      return set(rest);
    case 'list':
      return list(rest);
    case 'rm':
      return rm(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(SECRETS_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown secrets command "${visible(sub)}"; allowed: set, list, rm`);
  }
}

function secretName(a: { positionals: string[]; rest: string[] }, usage: string, extra: string): string {
  const xs = [...a.positionals, ...a.rest];
  if (xs.length > 1) throw new UsageError(extra);
  if (xs.length !== 1) throw new UsageError(`usage: ${usage}`);
  const r = SecretName.safeParse(xs[0]);
  if (!r.success) throw new UsageError(`secret name "${visible(xs[0]!)}": ${r.error.issues[0]!.message}`);
  return r.data;
}

/** The value: all of stdin (one trailing line break dropped), or typed at a prompt that does not echo. */
async function readValue(): Promise<string> {
  if (!process.stdin.isTTY) {
    let s = '';
    for await (const c of process.stdin) s += c;
    return s.replace(/\r?\n$/, '');
  }
  const muted = new Writable({ write: (_c, _e, cb) => cb() });
  process.stderr.write('value (not shown): ');
  const rl = createInterface({ input: process.stdin, output: muted, terminal: true });
  const line = await new Promise<string>((r) => rl.once('line', r));
  rl.close();
  process.stderr.write('\n');
  return line;
}

async function set(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'secrets set');
  if (a.flags.help) return (help('usage: gatehouse secrets set <name>   (the value from stdin or a prompt)', {}), 0);
  const name = secretName(
    a,
    'gatehouse secrets set <name>',
    'gatehouse secrets set takes only the name: the value is read from stdin or a prompt, never from the command line (shell history and ps would keep it)',
  );
  const value = await readValue();
  const r = await api<{ created: boolean }>(connection(a.flags), 'PUT', `/secrets/${name}`, { value });
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson({ name, created: r.value.created }), 0);
  out(`${r.value.created ? 'set' : 'replaced'}: secret ${name}`);
  return 0;
}

async function list(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'secrets list');
  if (a.flags.help) return (help('usage: gatehouse secrets list', {}), 0);
  if (a.positionals.length || a.rest.length) throw new UsageError('secrets list takes no arguments');
  const r = await api<{ secrets: Row[] }>(connection(a.flags), 'GET', '/secrets');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  if (!r.value.secrets.length) return (info('no secrets (gatehouse secrets set NAME adds one)'), 0);
  out(table([['NAME', 'UPDATED', 'BY', 'CREATED'], ...r.value.secrets.map((x) => [text(x.name), when(x.updated_at), text(x.updated_by), when(x.created_at)])]));
  return 0;
}

async function rm(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'secrets rm');
  if (a.flags.help) return (help('usage: gatehouse secrets rm <name>', {}), 0);
  const name = secretName(a, 'gatehouse secrets rm <name>', 'usage: gatehouse secrets rm <name> (one name)');
  const r = await api<{ removed: boolean }>(connection(a.flags), 'DELETE', `/secrets/${name}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`removed: secret ${name}`);
  return 0;
}
