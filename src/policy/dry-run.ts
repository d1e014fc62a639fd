/**
 * A dry run of a team policy for a call as `execute` / `runtime_execute` would make it: the MCP `policy_check` tool and
 * the admin API's `POST /policy/check` answer with it. Nothing runs.
 */
import type { z } from 'zod';
import type { PolicyDocument } from '../contracts/policy.ts';
import type { PolicyCheckInput, PolicyCheckOutput } from '../contracts/tools.ts';
import { decide, type PolicyDecision, verdictOf } from './engine.ts';
import { grantSummary } from './network.ts';

type PolicyCheckArgs = z.infer<z.ZodObject<typeof PolicyCheckInput>>;

/** `policy_check`'s answer (`PolicyCheckOutput`), its network as `grantLine` reads it. */
type PolicyCheckAnswer = Omit<z.infer<z.ZodObject<typeof PolicyCheckOutput>>, 'network'> & { network?: ReturnType<typeof grantSummary> };

export async function dryRun(
  policy: PolicyDocument,
  input: PolicyCheckArgs,
  who: { team: string; subject: string },
): Promise<{ decision: PolicyDecision; answer: PolicyCheckAnswer }> {
  // Without args (and without a runtime) the command is a shell string, as execute takes it.
  const shell = input.args === undefined && !input.runtime;
  const d = await decide(policy, {
    tool: input.runtime ? 'runtime_execute' : 'policy_check',
    mode: shell ? 'shell' : 'argv',
    command: input.command,
    args: input.args ?? [],
    runtime: input.runtime,
    cwd: input.cwd,
    env: input.env,
    timeoutMs: input.timeout_ms,
    ...(input.interactive || input.tty ? { interactive: true } : {}),
    team: who.team,
    subject: who.subject,
  });
  const network = d.effective ? grantSummary(policy, d.rule, d.effective.network) : undefined;
  return {
    decision: d,
    answer: {
      allowed: d.allowed,
      decision: verdictOf(d),
      stage: d.stage,
      reason: d.reason,
      notes: d.notes,
      ...(network ? { network } : {}),
      // Whether a job may take input after its start (job_input, tty): input to an interpreter is code on stdin.
      interactive: policy.interactive,
    },
  };
}
