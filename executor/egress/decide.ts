/**
 * The egress proxy's pure decisions: which grant entry covers a host, port and method, and
 * whether an address is one a job may reach (private, loopback, link-local, ULA, CGNAT,
 * multicast and reserved ranges are refused unless the entry says `privateAddresses: true`).
 */
import { BlockList, isIP } from 'node:net';
import type { NetworkAllow, NetworkGrant } from '../../src/contracts/network.ts';

/** Ports an entry without `ports` covers. */
const DEFAULT_PORTS = [80, 443];

/** A host as compared: lower case, no trailing dot, no IPv6 brackets. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

/** Whether `pattern` (an exact name or IP, or `*.suffix`) names `host` (both normalized). */
function hostMatches(pattern: string, host: string): boolean {
  const p = normalizeHost(pattern);
  if (p.startsWith('*.')) return host.endsWith(p.slice(1)) && host.length > p.length - 1;
  return p === host;
}

export type Decision =
  | { allowed: true; entry: NetworkAllow | null; reason: string }
  | { allowed: false; kind: 'unlisted' | 'port' | 'method'; reason: string; policyKey: string };

/**
 * The grant's verdict on `host:port` (and, for plain HTTP, `method`; CONNECT passes none: the
 * method of a request inside TLS is not visible to the proxy). An entry covers a host when its
 * pattern matches, its ports (default 80, 443) include the port and its methods (default all)
 * include the method. Among matching entries the first that covers the connection wins.
 */
export function decide(grant: NetworkGrant, rawHost: string, port: number, method?: string): Decision {
  const host = normalizeHost(rawHost);
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
    return { allowed: true, entry: e, reason: `${src}.allow[${i}] (${e.host})` };
  }
  if (grant.mode === 'open') return { allowed: true, entry: null, reason: `${src}.mode open` };
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

const v4 = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local (cloud metadata services live here)
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const)
  v4.addSubnet(net, bits, 'ipv4');
const v6 = new BlockList();
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96], // NAT64: reaches IPv4 addresses, possibly private ones
  ['100::', 64],
  ['2001:db8::', 32],
  ['2002::', 16], // 6to4: embeds an IPv4 address
  ['fc00::', 7], // ULA
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const)
  v6.addSubnet(net, bits, 'ipv6');

/** Whether `address` (an IP literal) is private, loopback, link-local, ULA, CGNAT, multicast or reserved. Not an IP → true. */
export function isPrivateAddress(address: string): boolean {
  const a = normalizeHost(address);
  const fam = isIP(a);
  if (fam === 4) return v4.check(a, 'ipv4');
  if (fam !== 6) return true;
  // An IPv4-mapped IPv6 address is the IPv4 address.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (mapped) return v4.check(mapped[1], 'ipv4');
  if (/^::ffff:/.test(a)) return true;
  return v6.check(a, 'ipv6');
}
