/** The proxy's pure decisions: grant entries, private address ranges, the ClientHello reader. */
import { describe, expect, it } from 'vitest';
import { decide, isPrivateAddress } from '../../../executor/egress/decide.ts';
import { readClientHello } from '../../../executor/egress/sni.ts';
import type { NetworkGrant } from '../../../src/contracts/network.ts';

const g = (allow: NetworkGrant['allow'], mode: NetworkGrant['mode'] = 'allowlist'): NetworkGrant => ({
  mode,
  allow,
  unlisted: 'deny',
  maxBytesUp: 1,
  maxBytesDown: 1,
  source: 'rules[1].network',
});

describe('decide', () => {
  it('names the entry that allowed, and the policy key to change when refused', () => {
    const grant = g([
      { host: 'a.test', methods: ['GET'] },
      { host: '*.b.test', ports: [8443] },
    ]);
    expect(decide(grant, 'A.TEST.', 80, 'GET')).toMatchObject({ allowed: true, reason: 'rules[1].network.allow[0] (a.test)' });
    expect(decide(grant, 'a.test', 443)).toMatchObject({ allowed: true });
    expect(decide(grant, 'a.test', 80, 'POST')).toMatchObject({ allowed: false, kind: 'method', policyKey: 'rules[1].network.allow[0].methods' });
    expect(decide(grant, 'x.b.test', 443)).toMatchObject({ allowed: false, kind: 'port', policyKey: 'rules[1].network.allow[1].ports' });
    expect(decide(grant, 'x.b.test', 8443)).toMatchObject({ allowed: true });
    expect(decide(grant, 'b.test', 8443)).toMatchObject({ allowed: false, kind: 'unlisted', policyKey: 'rules[1].network.allow' });
    expect(decide(g([], 'open'), 'any.test', 5432)).toMatchObject({ allowed: true, reason: 'rules[1].network.mode open' });
  });
});

describe('isPrivateAddress', () => {
  it('refuses private, loopback, link-local, ULA, CGNAT, multicast and mapped forms; passes public ones', () => {
    for (const a of ['10.0.0.1', '127.1.2.3', '0.0.0.0', '169.254.169.254', '172.31.0.1', '192.168.1.1', '100.100.0.1', '224.0.0.5', '255.255.255.255']) {
      expect(isPrivateAddress(a), a).toBe(true);
    }
    for (const a of ['::1', '::', 'fd12::1', 'fe80::1', 'ff02::1', '::ffff:10.0.0.1', '::ffff:7f00:1', '64:ff9b::a00:1', 'not-an-ip']) {
      expect(isPrivateAddress(a), a).toBe(true);
    }
    for (const a of ['93.184.216.34', '1.1.1.1', '2606:4700::1111', '::ffff:93.184.216.34']) expect(isPrivateAddress(a), a).toBe(false);
  });
});

describe('readClientHello', () => {
  it('asks for more bytes, then reads the server name; refuses what is not TLS', () => {
    const name = Buffer.from('registry.test');
    const sniExt = Buffer.concat([u16(0), u16(name.length + 5), u16(name.length + 3), Buffer.from([0]), u16(name.length), name]);
    const body = Buffer.concat([u16(0x0303), Buffer.alloc(32), Buffer.from([0]), u16(2), u16(0x1301), Buffer.from([1, 0]), u16(sniExt.length), sniExt]);
    const hs = Buffer.concat([Buffer.from([1, 0, body.length >> 8, body.length & 0xff]), body]);
    const rec = Buffer.concat([Buffer.from([22, 3, 1]), u16(hs.length), hs]);
    expect(readClientHello(rec.subarray(0, 10))).toEqual({ kind: 'more' });
    expect(readClientHello(rec)).toEqual({ kind: 'sni', name: 'registry.test' });
    expect(readClientHello(Buffer.from('GET / HTTP/1.1\r\n\r\n'))).toEqual({ kind: 'not-tls' });
  });
});

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}
