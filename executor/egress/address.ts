/**
 * What a host the egress proxy is asked for really is: an IP address in any spelling, reduced to
 * the one canonical address the proxy would dial and the special-purpose range it lies in, or a
 * DNS name (resolved by the proxy, each answer judged the same way). The proxy judges and dials
 * that canonical address, never the text it was given (docs/network.md, "Addresses").
 *
 * Spellings: IPv4 as inet_aton reads it (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`);
 * IPv6 long, short, mixed case, zero-padded, with a dotted IPv4 tail, with a zone id; IPv4
 * embedded in IPv6 (mapped `::ffff:0:0/96`, compatible `::/96`, NAT64, 6to4, Teredo) is judged
 * as the IPv4 it carries. Ranges: the IANA IPv4 and IPv6 special-purpose registries (RFC 6890
 * and its updates), plus anything outside IPv6 global unicast `2000::/3`.
 */
import ipaddr from 'ipaddr.js';

/** The special-purpose range an address lies in. */
interface Special {
  /** The range as CIDR (for an embedded IPv4, the IPv4's range). */
  range: string;
  /** What the range is: `loopback`, `private`, `link-local (cloud metadata)`, … */
  label: string;
  /** The IPv6 form that carried an embedded IPv4: `NAT64 64:ff9b::/96`. */
  via?: string;
  /** A public IPv4 a refused IPv6 form (6to4, Teredo, IPv4-compatible) carries. */
  embeds?: string;
}

/** An address as the proxy judges and dials it. */
export interface Address {
  /** Dotted IPv4 (also for an IPv4-mapped IPv6 address), else RFC 5952 IPv6 with its zone. */
  address: string;
  /** Null when globally reachable. */
  special: Special | null;
}

/** A host as the proxy was asked for it. */
export type Host = { kind: 'address'; address: Address } | { kind: 'name'; name: string } | { kind: 'invalid'; reason: string };

/** A host as compared: lower case, no trailing dot, no IPv6 brackets. */
export function normalizeHost(host: string): string {
  let h = host.trim().toLowerCase();
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.endsWith('.')) h = h.slice(0, -1);
  return h;
}

type Range = readonly [cidr: string, label: string];

/** IANA IPv4 special-purpose registry; the first match wins (more specific first). */
const V4: readonly Range[] = [
  ['0.0.0.0/32', 'unspecified'],
  ['0.0.0.0/8', 'this network'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'shared address space (CGNAT)'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local (cloud metadata)'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'IETF protocol assignments'],
  ['192.0.2.0/24', 'documentation'],
  ['192.31.196.0/24', 'AS112'],
  ['192.52.193.0/24', 'AMT'],
  ['192.88.99.0/24', '6to4 relay anycast (deprecated)'],
  ['192.168.0.0/16', 'private'],
  ['192.175.48.0/24', 'AS112 direct delegation'],
  ['198.18.0.0/15', 'benchmarking'],
  ['198.51.100.0/24', 'documentation'],
  ['203.0.113.0/24', 'documentation'],
  ['224.0.0.0/4', 'multicast'],
  ['255.255.255.255/32', 'broadcast'],
  ['240.0.0.0/4', 'reserved'],
];

/** IANA IPv6 special-purpose registry, without the ranges that embed an IPv4 (handled first). */
const V6: readonly Range[] = [
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::ffff:0:0:0/96', 'IPv4-translated (SIIT)'],
  ['64:ff9b:1::/48', 'local-use NAT64'],
  ['100::/64', 'discard-only'],
  ['100:0:0:1::/64', 'dummy prefix'],
  ['2001:db8::/32', 'documentation'],
  ['2001::/23', 'IETF protocol assignments'],
  ['2620:4f:8000::/48', 'AS112 direct delegation'],
  ['3fff::/20', 'documentation'],
  ['5f00::/16', 'segment routing SIDs'],
  ['fc00::/7', 'unique local (ULA)'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'site-local (deprecated)'],
  ['ff00::/8', 'multicast'],
];

const parsed = <T extends ipaddr.IPv4 | ipaddr.IPv6>(list: readonly Range[]) =>
  list.map(([cidr, label]) => ({ cidr, label, net: ipaddr.parseCIDR(cidr) as [T, number] }));
const V4_NETS = parsed<ipaddr.IPv4>(V4);
const V6_NETS = parsed<ipaddr.IPv6>(V6);
const MAPPED = ipaddr.parseCIDR('::ffff:0:0/96');
const COMPATIBLE = ipaddr.parseCIDR('::/96');
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');
const TEREDO = ipaddr.parseCIDR('2001::/32');
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');

/** A strict dotted-decimal IPv4 (no leading zeros, no hex): the only IPv4 tail an IPv6 spelling may have. */
const DOTTED = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
/** A zone id: an interface name or index. */
const ZONE = /^[a-z0-9_.-]{1,16}$/;
/** A DNS name the resolver is asked for: letters, digits, `-`, `_`; labels of 1–63. */
const NAME = /^[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*$/;
/** A last label the resolver would read as (part of) an IPv4 address. */
const NUMERIC_LABEL = /(?:^|\.)(?:\d+|0x[0-9a-f]*)$/;

/** The IP literal in `text` (any spelling), or null when `text` is not one. */
export function parseAddress(text: string): Address | null {
  const t = normalizeHost(text);
  if (!t.includes(':')) {
    if (!ipaddr.IPv4.isValid(t)) return null;
    const v4 = ipaddr.IPv4.parse(t);
    return { address: v4.toString(), special: classify4(v4) };
  }
  const pct = t.indexOf('%');
  const zone = pct < 0 ? '' : t.slice(pct + 1);
  let base = pct < 0 ? t : t.slice(0, pct);
  if (pct >= 0 && !ZONE.test(zone)) return null;
  if (base.includes('.')) {
    // ipaddr.js reads `::a.b.c.d` as mapped and octal/hex tails as decimal; convert the tail ourselves.
    const colon = base.lastIndexOf(':');
    const tail = base.slice(colon + 1);
    if (!DOTTED.test(tail)) return null;
    const o = tail.split('.').map(Number);
    base = `${base.slice(0, colon + 1)}${((o[0] << 8) | o[1]).toString(16)}:${((o[2] << 8) | o[3]).toString(16)}`;
  }
  if (!ipaddr.IPv6.isValid(base)) return null;
  const v6 = ipaddr.IPv6.parse(base);
  if (v6.match(MAPPED)) {
    // The IPv4 itself: the kernel connects a mapped address to it, and the proxy dials it so.
    const v4 = v6.toIPv4Address();
    return { address: v4.toString(), special: classify4(v4) };
  }
  return { address: `${v6.toRFC5952String()}${zone ? `%${zone}` : ''}`, special: classify6(v6) };
}

/** A host as asked for (URL host, CONNECT authority, resolver answer): an address, a name, or neither. */
export function parseHost(raw: string): Host {
  const t = normalizeHost(raw);
  const address = parseAddress(t);
  if (address) return { kind: 'address', address };
  if (t.includes(':')) return { kind: 'invalid', reason: `not a valid IP address: "${t.slice(0, 100)}"` };
  if (t.length > 253 || !NAME.test(t)) return { kind: 'invalid', reason: `not a host name or IP address: "${t.slice(0, 100)}"` };
  // `256.1.1.1`, `08.1`: a resolver may still read these as IPv4 in its own way; the proxy never asks it to.
  if (NUMERIC_LABEL.test(t)) return { kind: 'invalid', reason: `not a valid IP address: "${t.slice(0, 100)}"` };
  return { kind: 'name', name: t };
}

/** `127.0.0.1 (loopback 127.0.0.0/8)`, `64:ff9b::a00:1 (private 10.0.0.0/8, embedded in NAT64 64:ff9b::/96)`. */
export function describeAddress(a: Address): string {
  const s = a.special;
  if (!s) return a.address;
  return `${a.address} (${s.label} ${s.range}${s.via ? `, embedded in ${s.via}` : ''}${s.embeds ? `, embeds ${s.embeds}` : ''})`;
}

function classify4(a: ipaddr.IPv4): Special | null {
  const hit = V4_NETS.find((r) => a.match(r.net));
  return hit ? { range: hit.cidr, label: hit.label } : null;
}

function classify6(a: ipaddr.IPv6): Special | null {
  const p = a.parts;
  const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  // Forms that carry an IPv4: judged as that IPv4 first; the deprecated ones are refused besides.
  const embedded = (name: string, cidr: string, inner: ipaddr.IPv4, alwaysSpecial: boolean): Special | null => {
    const s = classify4(inner);
    if (s) return { ...s, via: `${name} ${cidr}` };
    return alwaysSpecial ? { range: cidr, label: name, embeds: inner.toString() } : null;
  };
  if (a.match(COMPATIBLE) && !(p[6] === 0 && p[7] <= 1)) return embedded('IPv4-compatible', '::/96', v4(p[6], p[7]), true);
  if (a.match(NAT64)) return embedded('NAT64', '64:ff9b::/96', v4(p[6], p[7]), false);
  if (a.match(SIX_TO_FOUR)) return embedded('6to4', '2002::/16', v4(p[1], p[2]), true);
  if (a.match(TEREDO)) {
    // The server's IPv4 in bits 32–63, the client's (inverted) in the last 32.
    const server = classify4(v4(p[2], p[3]));
    if (server) return { ...server, via: 'Teredo 2001::/32' };
    return embedded('Teredo', '2001::/32', v4(~p[6] & 0xffff, ~p[7] & 0xffff), true);
  }
  const hit = V6_NETS.find((r) => a.match(r.net));
  if (hit) return { range: hit.cidr, label: hit.label };
  return a.match(GLOBAL_UNICAST) ? null : { range: '2000::/3', label: 'reserved (outside global unicast)' };
}
