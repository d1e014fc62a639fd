/**
 * The `gatehouse` CLI: admin commands against a gateway (tokens, policy, audit), the offline
 * bootstrap of the first admin token, and `gatehouse agent` (the executor agent).
 * Exit codes: 0 ok, 1 the gateway refused or failed (printed as "error (code): message"), 2 usage.
 */
import { readFileSync } from 'node:fs';
import { UsageError, GLOBAL_FLAGS, formatFlags } from './args.ts';
import { info, out } from './io.ts';
import { tokenCommand } from './token.ts';
import { policyCommand } from './policy.ts';
import { auditCommand } from './audit.ts';

const COMMANDS = ['token', 'policy', 'audit', 'agent', 'help'];

export const HELP = `gatehouse — admin CLI and executor agent of a Gatehouse MCP gateway

usage:
  gatehouse token create --scope <scope> [--scope ...] [--subject s] [--ttl 30d] [--note text]
  gatehouse token list
  gatehouse token revoke <jti>
  gatehouse token bootstrap --team <team> --key-file <jwk.json|.dev.vars> --issuer URL --audience URL
  gatehouse policy get | set <file.json|-> | check [--runtime r] [--cwd d] -- <command> [args...]
  gatehouse audit tail [--limit N] [--follow] [--decision denied]
  gatehouse agent --url URL --token <agent token> --root DIR [...]   (run an executor agent)
  gatehouse --version

connection (admin commands):
${formatFlags({ url: GLOBAL_FLAGS.url, token: GLOBAL_FLAGS.token, json: GLOBAL_FLAGS.json }, false)}

"gatehouse <command> --help" shows each command's flags.`;

export function version(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  try {
    switch (cmd) {
      case 'token': return await tokenCommand(rest);
      case 'policy': return await policyCommand(rest);
      case 'audit': return await auditCommand(rest);
      case 'agent': {
        // The agent lives in executor/main.ts (its own module); loaded only when asked for.
        // (A variable specifier keeps the CLI type-checking on its own while the agent evolves.)
        const agentModule = '../main.ts';
        const agent = (await import(agentModule)) as { runAgentCli(argv: string[]): Promise<number> };
        return await agent.runAgentCli(rest);
      }
      case '--version': case '-v': case 'version':
        out(version());
        return 0;
      case '--help': case '-h': case 'help':
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
