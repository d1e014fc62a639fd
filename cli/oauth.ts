/** `gatehouse oauth grants|revoke|revoke-client|unblock-client`: the team's OAuth grants as credentials. */
import { parseArgs, UsageError, formatFlags, type FlagSpecs } from './args.ts';
import { api, connection, formatError } from './client.ts';
import { info, iso, out, printJson, table } from './io.ts';
// Client names and ids are chosen by whoever registered the client: shown as data, never as terminal control.
import { visible } from '../src/contracts/visible-text.ts';
import type { OAuthGrantView } from '../src/contracts/oauth-grants.ts';

const OAUTH_HELP = `gatehouse oauth — the team's OAuth grants (MCP clients an admin connected)

usage:
  gatehouse oauth grants [--all]              live grants (--all: ended ones too, with why)
  gatehouse oauth revoke <grant-id>           end one grant: its access and refresh tokens stop at once
  gatehouse oauth revoke-client <client-id>   end every grant of a client in the team and refuse it until unblocked
  gatehouse oauth unblock-client <client-id>  let the client be granted again

Revoking an admin token (gatehouse token revoke) also ends the grants it consented to.`;

const help = (usage: string, specs: FlagSpecs) => out(`${usage}\n\nflags:\n${formatFlags(specs)}`);

export async function oauthCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'grants':
      return grants(rest);
    case 'revoke':
      return revoke(rest, 'revoke', (id) => `/oauth/grants/${encodeURIComponent(id)}`);
    case 'revoke-client':
      return revoke(rest, 'revoke-client', (id) => `/oauth/clients/${encodeURIComponent(id)}`);
    case 'unblock-client':
      return revoke(rest, 'unblock-client', (id) => `/oauth/clients/${encodeURIComponent(id)}/block`);
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      out(OAUTH_HELP);
      return sub === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown oauth command "${sub}"; allowed: grants, revoke, revoke-client, unblock-client`);
  }
}

async function grants(argv: string[]): Promise<number> {
  const flags = { all: { type: 'bool', help: 'also list ended grants (revoked, replaced, expired, never completed)' } } as const;
  const a = parseArgs(argv, flags, 'oauth grants');
  if (a.flags.help) return (help('usage: gatehouse oauth grants [--all]', flags), 0);
  if (a.positionals.length) throw new UsageError('oauth grants takes no arguments');
  const r = await api<{ grants: OAuthGrantView[] }>(connection(a.flags), 'GET', '/oauth/grants');
  if (!r.ok) return (info(formatError(r.error)), 1);
  const state = (g: OAuthGrantView) =>
    g.state === 'revoked'
      ? `revoked ${iso(g.revokedAt)}: ${g.revokedReason ?? 'by an admin'}`
      : g.state === 'pending'
        ? 'pending (code not exchanged yet)'
        : g.state === 'abandoned'
          ? 'never completed (the code expired unexchanged)'
          : g.state;
  const shown = a.flags.all ? r.value.grants : r.value.grants.filter((g) => g.state === 'active' || g.state === 'pending');
  if (a.flags.json) return (printJson({ grants: shown }), 0);
  if (!shown.length) return (info(a.flags.all ? 'no OAuth grants' : 'no live OAuth grants (--all lists ended ones)'), 0);
  const rows = shown.map((g) => [
    g.grantId,
    g.clientName === null ? '(unnamed)' : visible(g.clientName),
    visible(g.clientId),
    visible(g.subject),
    g.scopes.join(' '),
    iso(g.createdAt),
    iso(g.lastUsedAt),
    visible(state(g)),
  ]);
  out(table([['GRANT', 'CLIENT', 'CLIENT ID', 'CONSENTED BY', 'SCOPES', 'CREATED', 'LAST USED', 'STATE'], ...rows]));
  return 0;
}

async function revoke(argv: string[], name: string, path: (id: string) => string): Promise<number> {
  const a = parseArgs(argv, {}, `oauth ${name}`);
  const what = name === 'revoke' ? '<grant-id>' : '<client-id>';
  if (a.flags.help) return (help(`usage: gatehouse oauth ${name} [--] ${what}`, {}), 0);
  const ids = [...a.positionals, ...a.rest];
  if (ids.length !== 1)
    throw new UsageError(`usage: gatehouse oauth ${name} ${what} (exactly one id; see gatehouse oauth grants; an id that starts with "-" goes after "--")`);
  const id = ids[0];
  const r = await api<{ grantId?: string; revokedAt?: number; clientId?: string; grantsEnded?: string[] }>(connection(a.flags), 'DELETE', path(id));
  if (!r.ok) return (info(formatError(r.error)), 1);
  if (a.flags.json) return (printJson(r.value), 0);
  if (name === 'revoke') out(`revoked grant ${r.value.grantId} at ${iso(r.value.revokedAt)}`);
  else if (name === 'revoke-client') out(`client ${visible(id)} blocked for the team; grants ended: ${r.value.grantsEnded?.join(' ') || 'none'}`);
  else out(`client ${visible(id)} may be granted again`);
  return 0;
}
