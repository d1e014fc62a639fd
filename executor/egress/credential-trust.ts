/**
 * Which of a job's credential bindings its agent holds values for (from `job.start`). The job trusts the
 * agent CA that serves them through the sandbox's CA bundle (executor/sandbox/trusted-cas.ts; main.ts
 * adds the agent CA's file to its extra CA files).
 */
import type { NetworkGrant } from '../../src/contracts/network.ts';
import type { CredentialValue } from '../../src/contracts/secrets.ts';
import type { HeldCredential } from './gate.ts';

/** The bindings of `grant` with their values from `job.start`; an error naming a binding whose value did not come. */
export function holdCredentials(
  grant: NetworkGrant,
  values: readonly CredentialValue[] | undefined,
): { ok: true; held: HeldCredential[] } | { ok: false; message: string } {
  const held: HeldCredential[] = [];
  for (const binding of grant.credentials ?? []) {
    const v = values?.find((x) => x.secret === binding.secret);
    if (!v) return { ok: false, message: `the job's ${grant.source}.credentials name "${binding.secret}", whose value the gateway did not send` };
    held.push({ binding, value: v.value });
  }
  return { ok: true, held };
}
