/**
 * The job's side of credentials: which of its grant's bindings it holds values for, and — until the
 * sandbox's trusted-CA bundle takes extra CA files (executor/sandbox/trusted-cas.ts, `extraCaFiles`) —
 * a bundle in the job dir of the host's CAs plus the agent CA, named by the variables common clients read.
 * TEMPORARY (the smallest way): this bundle and its variables go once the agent CA joins that bundle.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NetworkGrant } from '../../src/contracts/network.ts';
import type { CredentialValue } from '../../src/contracts/secrets.ts';
import type { AgentCaFile } from './agent-ca.ts';
import type { HeldCredential } from './credential-forward.ts';

const BUNDLE_FILE = '.gatehouse-trusted-cas.pem';
/** Debian's (and Ubuntu's) system bundle; elsewhere only the agent CA is named. */
const SYSTEM_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

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

/** Writes the trust bundle into the job dir; the env that names it (inside paths). */
export function credentialTrustEnv(jobDirHost: string, jobDirInside: string, ca: AgentCaFile): Record<string, string> {
  const agentCa = readFileSync(ca.certPath, 'utf8');
  const system = existsSync(SYSTEM_BUNDLE) ? readFileSync(SYSTEM_BUNDLE, 'utf8') : '';
  writeFileSync(join(jobDirHost, BUNDLE_FILE), `${system.trimEnd()}\n${agentCa}`, { mode: 0o644 });
  const inside = `${jobDirInside}/${BUNDLE_FILE}`;
  return {
    SSL_CERT_FILE: inside,
    NODE_EXTRA_CA_CERTS: inside,
    CURL_CA_BUNDLE: inside,
    GIT_SSL_CAINFO: inside,
    REQUESTS_CA_BUNDLE: inside,
    npm_config_cafile: inside,
  };
}
