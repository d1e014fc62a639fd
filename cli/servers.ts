/** `gatehouse servers add|list|rm|connect`: the remote MCP servers the team's scripts may call as `servers.<id>`. */
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { text, when, type Row } from './fields.ts';
import { info, out, printJson, table } from './io.ts';

const ADD_FLAGS: FlagSpecs = {
  header: { type: 'list', value: 'Name: value', help: 'a header sent with every request to the server (stored encrypted)' },
  'header-env': { type: 'list', value: 'Name=VAR', help: 'a header whose value is read from environment variable VAR (keeps it out of shell history)' },
  description: { type: 'string', value: 'text', help: 'what the server is for' },
  oauth: { type: 'bool', help: 'the server requires OAuth: connect the team afterwards with gatehouse servers connect <id>' },
  scope: { type: 'string', value: 'scopes', help: 'OAuth scopes to ask for (space-separated; default: what the server names)' },
};

const CONNECT_FLAGS: FlagSpecs = {
  'new-client': { type: 'bool', help: 'register a new OAuth client instead of using the one the last connection registered' },
};

const SERVERS_HELP = `gatehouse servers — remote MCP servers the team's scripts call (servers.<id>.call(tool, args))

usage:
  gatehouse servers add <id> <server URL> [--header 'Name: value']... [--header-env Name=VAR]... [--description text]
                                            register (or replace) a server: its Streamable HTTP endpoint
                                            (http: or https:); header values are stored encrypted
  gatehouse servers list                    the registered servers (header names, OAuth state; never a value or token)
  gatehouse servers connect <id> [--new-client]
                                            connect the team to an OAuth server: prints the URL to open in a
                                            browser; once signed in there, gatehouse servers list shows it connected.
                                            A reconnect uses the OAuth client registered before; --new-client
                                            registers another (when the authorization server no longer knows it)
  gatehouse servers rm <id>                 remove a server

flags (add):
${formatFlags(ADD_FLAGS)}

Which servers and tools a script may call is the policy's script.servers section (docs/script-mode.md).`;

export async function serversCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'add':
      return add(rest, env);
    case 'list':
      return list(rest);
    case 'rm':
      return remove(rest);
    case 'connect':
      return connect(rest);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(SERVERS_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown servers command "${sub}"; allowed: add, list, rm, connect`);
  }
}

function oneId(a: { positionals: string[]; rest: string[] }, verb: string): string {
  const ids = [...a.positionals, ...a.rest];
  if (ids.length !== 1) throw new UsageError(`usage: gatehouse servers ${verb} <id> (exactly one server id)`);
  return ids[0]!;
}

/** `--header 'Name: value'` and `--header-env Name=VAR` as one header map. */
function headersOf(flags: Record<string, unknown>, env: NodeJS.ProcessEnv): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const h of (flags.header as string[] | undefined) ?? []) {
    const i = h.indexOf(':');
    if (i <= 0) throw new UsageError(`--header "${h.slice(0, 40)}" must be "Name: value"`);
    headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
  }
  for (const h of (flags['header-env'] as string[] | undefined) ?? []) {
    const [name, variable] = h.split('=', 2);
    if (!name || !variable) throw new UsageError(`--header-env "${h}" must be "Name=VAR"`);
    const value = env[variable];
    if (value === undefined) throw new UsageError(`--header-env ${name}=${variable}: environment variable ${variable} is not set`);
    headers[name] = value;
  }
  return headers;
}

async function add(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const a = parseArgs(argv, ADD_FLAGS, 'servers add');
  if (a.flags.help) return (out(SERVERS_HELP), 0);
  const [id, url, ...extra] = [...a.positionals, ...a.rest];
  if (!id || !url || extra.length) throw new UsageError('usage: gatehouse servers add <id> <server URL> [--header "Name: value"]... (--url is the gateway\'s)');
  const body = {
    url,
    headers: headersOf(a.flags, env),
    ...(a.flags.description !== undefined ? { description: String(a.flags.description) } : {}),
    ...(a.flags.oauth ? { auth: 'oauth' } : {}),
    ...(a.flags.scope !== undefined ? { scope: String(a.flags.scope) } : {}),
  };
  const r = await api<{ server: Row; replaced: boolean }>(connection(a.flags), 'PUT', `/servers/${encodeURIComponent(id)}`, body);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const names = Object.keys(body.headers);
  out(`${r.value.replaced ? 'replaced' : 'registered'} ${id}: ${body.url}${names.length ? ` (headers: ${names.join(', ')}, stored encrypted)` : ''}`);
  if (a.flags.oauth) out(`connect the team with: gatehouse servers connect ${id}`);
  return 0;
}

async function list(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'servers list');
  if (a.flags.help) return (out(SERVERS_HELP), 0);
  if (a.positionals.length || a.rest.length) throw new UsageError('servers list takes no positional arguments');
  const r = await api<{ servers: Row[] }>(connection(a.flags), 'GET', '/servers');
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  const rows = r.value.servers ?? [];
  if (!rows.length) info('no remote MCP servers; add one with gatehouse servers add <id> <server URL>');
  else
    out(
      table([
        ['ID', 'URL', 'HEADERS', 'AUTH', 'ADDED', 'BY'],
        ...rows.map((x) => [
          text(x.id),
          text(x.url),
          ((x.headerNames as string[] | undefined) ?? []).join(',') || '-',
          authOf(x),
          when(x.createdAt),
          text(x.createdBy),
        ]),
      ]),
    );
  return 0;
}

async function remove(argv: string[]): Promise<number> {
  const a = parseArgs(argv, {}, 'servers rm');
  if (a.flags.help) return (out(SERVERS_HELP), 0);
  const id = oneId(a, 'rm');
  const r = await api<{ removed: string }>(connection(a.flags), 'DELETE', `/servers/${encodeURIComponent(id)}`);
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(`removed ${id}`);
  return 0;
}

/** The AUTH column: `headers`, or the OAuth connection's state with its expiry and scopes. */
function authOf(x: Row): string {
  if (x.auth !== 'oauth') return 'headers';
  const o = (x.oauth ?? {}) as { state?: string; expiresAt?: string | null; scopes?: string[] };
  const parts = [`oauth:${o.state ?? 'not_connected'}`];
  if (o.expiresAt) parts.push(`expires ${o.expiresAt}`);
  if (o.scopes?.length) parts.push(`scopes ${o.scopes.join(' ')}`);
  return parts.join(', ');
}

async function connect(argv: string[]): Promise<number> {
  const a = parseArgs(argv, CONNECT_FLAGS, 'servers connect');
  if (a.flags.help) return (out(SERVERS_HELP), 0);
  const id = oneId(a, 'connect');
  const body = a.flags['new-client'] ? { newClient: true } : {};
  const r = await api<{ authorizationUrl: string; expiresAt: string; client: 'reused' | 'registered' }>(
    connection(a.flags),
    'POST',
    `/servers/${encodeURIComponent(id)}/connect`,
    body,
  );
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  out(r.value.authorizationUrl);
  const client = r.value.client === 'reused' ? 'the OAuth client registered before' : 'a newly registered OAuth client';
  info(`open the URL above in a browser and sign in before ${r.value.expiresAt} (${client}); then gatehouse servers list shows ${id} as oauth:connected`);
  return 0;
}
