/**
 * The `gatehouse` admin CLI: commands against a gateway's admin API (tokens, policy, audit,
 * agents, jobs, approvals) and the offline bootstrap of the first admin token. `gatehouse agent …` is the
 * executor agent, which bin/gatehouse.mjs starts without loading this module.
 * Exit codes: 0 ok, 1 the gateway refused or failed (printed as "error (code): message"), 2 usage.
 */
import { readFileSync } from 'node:fs';
import { UsageError, GLOBAL_FLAGS, formatFlags } from './args.ts';
import { info, out } from './io.ts';
import { tokenCommand } from './token.ts';
import { keyCommand } from './key.ts';
import { policyCommand } from './policy.ts';
import { auditCommand } from './audit.ts';
import { agentsCommand } from './agents.ts';
import { jobsCommand } from './jobs.ts';
import { approvalsCommand } from './approvals.ts';
import { oauthCommand } from './oauth.ts';
import { membersCommand } from './members.ts';
import { teamCommand } from './team.ts';
import { scriptsCommand } from './scripts.ts';
import { secretsCommand } from './secrets.ts';
import { serversCommand } from './servers.ts';
import { workspacesCommand } from './workspaces.ts';

const COMMANDS = [
  'token',
  'key',
  'members',
  'oauth',
  'policy',
  'audit',
  'agents',
  'jobs',
  'approvals',
  'scripts',
  'secrets',
  'servers',
  'workspaces',
  'team',
  'agent',
  'help',
];

export const HELP = `gatehouse — admin CLI and executor agent of a Gatehouse MCP gateway

usage:
  gatehouse token create --scope <scope> [--scope ...] [--subject s] [--ttl 30d] [--note text]
  gatehouse token list
  gatehouse token revoke <jti>
  gatehouse token bootstrap --team <team> --key-file <jwk.json|.dev.vars> --issuer URL --audience URL
  gatehouse key generate [--out FILE]
  gatehouse key rotate --key-file CURRENT --out NEW
  gatehouse members list | invite <email> [--role r] | withdraw <id> | role <member> <role> | remove <member>
  gatehouse oauth grants [--all] | revoke <grant-id>  MCP clients an admin connected (OAuth grants)
  gatehouse oauth revoke-client <client-id> | unblock-client <client-id>
  gatehouse policy get | set <file.json|-> | check [--runtime r] [--cwd d] -- <command> [args...]
  gatehouse policy presets | preset <name>            the presets and what each allows; switch to one
  gatehouse audit tail [--limit N] [--follow] [--decision denied] [--tool t] | export [--since t] | egress [--refused] | storage
  gatehouse agents                                    the team's executor agents
  gatehouse jobs list [--state s] | show <id> | kill <id>
  gatehouse approvals list [--status pending] | show <id> | approve <id> | deny <id>   runs the policy asks about
  gatehouse scripts push <file> [--name n] | list | versions <name> | show <name> [--version N] | rm <name> [--version N]
  gatehouse secrets set <name> (value from stdin or a prompt) | list | rm <name>
                                                      the team's script library (run_script {"name": …})
  gatehouse servers add <id> <server URL> [--header 'Name: value'] | list | rm <id>   remote MCP servers for scripts
  gatehouse workspaces list | rm <id>                 the team's per-task workspaces
  gatehouse team create <id> | list | show <id> | suspend <id> | resume <id> | quotas <id> | usage <id> | delete <id>
                                                      the deployment's teams (an operator token)
  gatehouse agent --url URL --token-file FILE --root DIR [...]   run an executor agent
  gatehouse agent doctor --url URL --token-file FILE             check an agent host
  gatehouse --version [--json]

connection (admin commands):
${formatFlags({ url: GLOBAL_FLAGS.url, token: GLOBAL_FLAGS.token, json: GLOBAL_FLAGS.json }, false)}

"gatehouse <command> --help" shows each command's flags.`;

export function version(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case 'token':
        return await tokenCommand(rest);
      case 'key':
        return await keyCommand(rest);
      case 'policy':
        return await policyCommand(rest);
      case 'audit':
        return await auditCommand(rest);
      case 'agents':
        return await agentsCommand(rest);
      case 'jobs':
        return await jobsCommand(rest);
      case 'approvals':
        return await approvalsCommand(rest);
      case 'oauth':
        return await oauthCommand(rest);
      case 'members':
        return await membersCommand(rest);
      case 'scripts':
        return await scriptsCommand(rest);
      case 'secrets':
        return await secretsCommand(rest);
      case 'servers':
        return await serversCommand(rest);
      case 'workspaces':
        return await workspacesCommand(rest);
      case 'team':
        return await teamCommand(rest);
      case 'agent':
        info('gatehouse: "agent" is started by the gatehouse command itself (bin/gatehouse.mjs), not by the admin CLI');
        return 2;
      case '--version':
      case '-v':
      case 'version': {
        const extra = rest.filter((a) => a !== '--json');
        if (extra.length) throw new UsageError(`${cmd} takes no arguments but --json; got "${extra[0]}"`);
        out(rest.includes('--json') ? JSON.stringify({ version: version(), node: process.version }) : version());
        return 0;
      }
      case '--help':
      case '-h':
      case 'help':
        out(HELP);
        return 0;
      case undefined:
        out(HELP);
        return 2;
      default:
        info(`gatehouse: unknown command "${cmd}"; allowed: ${COMMANDS.join(', ')} (see gatehouse --help)`);
        return 2;
    }
  } catch (e) {
    if (e instanceof UsageError) {
      info(`gatehouse: ${e.message}`);
      return 2;
    }
    info(`error (internal): ${(e as Error)?.message ?? String(e)}`);
    return 1;
  }
}
