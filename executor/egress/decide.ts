/**
 * The egress proxy's pure decisions: which grant entry covers a host, port and method, and
 * whether the addresses a host stands for are ones a job may reach (any special-purpose address,
 * address.ts, is refused unless the entry that allowed the host says `privateAddresses: true`).
 */
import type { NetworkAllow, NetworkGrant } from '../../src/contracts/network.ts';
import { type Address, describeAddress, normalizeHost, parseAddress } from './address.ts';

/** Ports an entry without `ports` covers. */
const DEFAULT_PORTS = [80, 443];

/** Whether `pattern` (an exact name or IP, or `*.suffix`) names `host` (normalized; an address in its canonical form). */
function hostMatches(pattern: string, host: string): boolean {
  const p = parseAddress(pattern)?.address ?? normalizeHost(pattern);
  if (p.startsWith('*.')) return host.endsWith(p.slice(1)) && host.length > p.length - 1;
  return p === host;
}

export type Decision =
  /** `index`: the entry's place in the grant's allow list (null: the mode or an approval allowed it). */
  | { allowed: true; entry: NetworkAllow | null; index: number | null; reason: string }
  | { allowed: false; kind: 'unlisted' | 'port' | 'method'; reason: string; policyKey: string };

/**
 * The grant's verdict on `host:port` (and, for plain HTTP, `method`; CONNECT passes none: the
 * method of a request inside TLS is not visible to the proxy). An entry covers a host when its
 * pattern matches, its ports (default 80, 443) include the port and its methods (default all)
 * include the method. Among matching entries the first that covers the connection wins.
 */
export function decide(grant: NetworkGrant, rawHost: string, port: number, method?: string): Decision {
  const host = parseAddress(rawHost)?.address ?? normalizeHost(rawHost);
  const src = grant.source || 'network';
  let portMiss: number | null = null;
  let methodMiss: number | null = null;
  for (const [i, e] of grant.allow.entries()) {
    if (!hostMatches(e.host, host)) continue;
    if (!(e.ports ?? DEFAULT_PORTS).includes(port)) {
      portMiss ??= i;
      continue;
    }
    if (method && e.methods && !e.methods.includes(method as (typeof e.methods)[number])) {
      methodMiss ??= i;
      continue;
    }
    return { allowed: true, entry: e, index: i, reason: `${src}.allow[${i}] (${e.host})` };
  }
  if (grant.mode === 'open') return { allowed: true, entry: null, index: null, reason: `${src}.mode open` };
  if (methodMiss !== null) {
    const e = grant.allow[methodMiss];
    return {
      allowed: false,
      kind: 'method',
      reason: `method ${method} is not in ${src}.allow[${methodMiss}].methods (${e.methods!.join(', ')})`,
      policyKey: `${src}.allow[${methodMiss}].methods`,
    };
  }
  if (portMiss !== null) {
    const e = grant.allow[portMiss];
    return {
      allowed: false,
      kind: 'port',
      reason: `port ${port} is not in ${src}.allow[${portMiss}].ports (${(e.ports ?? DEFAULT_PORTS).join(', ')})`,
      policyKey: `${src}.allow[${portMiss}].ports`,
    };
  }
  return { allowed: false, kind: 'unlisted', reason: `not in ${src}.allow`, policyKey: `${src}.allow` };
}

/**
 * Whether a job may reach `host` at `addresses` (its literal address, or every address its name
 * resolved to) under the entry that allowed it: the first address when none is special-purpose,
 * or when the entry says `privateAddresses: true`; else a refusal naming the key that would allow
 * it. One special answer among public ones refuses the name (a rebinding or split-horizon name).
 */
export function decideAddresses(
  source: string,
  allowed: { entry: NetworkAllow | null; index: number | null },
  host: string,
  addresses: readonly Address[],
): { ok: true; address: Address } | { ok: false; reason: string; policyKey: string } {
  const special = addresses.find((a) => a.special);
  if (!special || allowed.entry?.privateAddresses) return { ok: true, address: addresses[0] };
  const policyKey = allowed.index === null ? `${source}.allow[].privateAddresses` : `${source}.allow[${allowed.index}].privateAddresses`;
  const how =
    allowed.index === null ? `allowed only by an entry of ${source}.allow for ${host} with privateAddresses: true` : `allowed only with ${policyKey}: true`;
  const what = host === special.address ? describeAddress(special) : `${host} resolves to ${describeAddress(special)}`;
  return { ok: false, reason: `private address ${what}; ${how}`, policyKey };
}
