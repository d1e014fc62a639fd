/** The proxy's pure decisions: grant entries, the addresses a host stands for, the ClientHello reader. */
import { describe, expect, it } from 'vitest';
import { parseAddress, type Address } from '../../../executor/egress/address.ts';
import { decide, decideAddresses } from '../../../executor/egress/decide.ts';
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

describe('decide: IP literal entries', () => {
  it('matches an entry written as an address whatever spelling the job used', () => {
    const grant = g([{ host: '10.0.0.5', privateAddresses: true }, { host: '[::ffff:10.0.0.6]' }]);
    for (const h of ['10.0.0.5', '0x0a000005', '167772165', '012.0.0.5', '10.5', '[::ffff:a00:5]', '0:0:0:0:0:FFFF:10.0.0.5']) {
      expect(decide(grant, h, 80), h).toMatchObject({ allowed: true, index: 0 });
    }
    expect(decide(grant, '10.0.0.6', 443)).toMatchObject({ allowed: true, index: 1 });
  });
});

describe('decideAddresses', () => {
  const addr = (s: string) => parseAddress(s) as Address;
  const entry = { host: 'internal.test' };

  it('refuses a special-purpose address, naming the range and the privateAddresses key of the entry that allowed the host', () => {
    const d = decideAddresses('rules[1].network', { entry, index: 2 }, '127.0.0.1', [addr('0x7f000001')]);
    expect(d).toEqual({
      ok: false,
      reason: 'private address 127.0.0.1 (loopback 127.0.0.0/8); allowed only with rules[1].network.allow[2].privateAddresses: true',
      policyKey: 'rules[1].network.allow[2].privateAddresses',
    });
  });

  it('under open mode or an approval names an entry to add', () => {
    const d = decideAddresses('network', { entry: null, index: null }, '169.254.169.254', [addr('[0:0:0:0:0:ffff:a9fe:a9fe]')]);
    expect(d).toMatchObject({ ok: false, policyKey: 'network.allow[].privateAddresses' });
    expect(!d.ok && d.reason).toBe(
      'private address 169.254.169.254 (link-local (cloud metadata) 169.254.0.0/16); allowed only by an entry of network.allow for 169.254.169.254 with privateAddresses: true',
    );
  });

  it('refuses a name when any of its addresses is special, even among public ones', () => {
    const d = decideAddresses('network', { entry, index: 0 }, 'mixed.test', [addr('93.184.216.34'), addr('64:ff9b::a00:1')]);
    expect(!d.ok && d.reason).toBe(
      'private address mixed.test resolves to 64:ff9b::a00:1 (private 10.0.0.0/8, embedded in NAT64 64:ff9b::/96); allowed only with network.allow[0].privateAddresses: true',
    );
  });

  it('passes public addresses, and special ones under privateAddresses: true; the first address is the one dialed', () => {
    expect(decideAddresses('network', { entry, index: 0 }, 'a.test', [addr('93.184.216.34'), addr('2606:4700::1111')])).toEqual({
      ok: true,
      address: { address: '93.184.216.34', special: null },
    });
    const priv = decideAddresses('network', { entry: { ...entry, privateAddresses: true }, index: 0 }, 'a.test', [addr('::ffff:10.1.2.3')]);
    expect(priv).toMatchObject({ ok: true, address: { address: '10.1.2.3' } });
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
