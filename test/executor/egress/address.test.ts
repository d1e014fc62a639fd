/** The address normaliser: every spelling of an IP literal is one canonical address, judged in its special-purpose range. */
import { describe, expect, it } from 'vitest';
import { describeAddress, parseAddress, parseHost } from '../../../executor/egress/address.ts';
import { FORBIDDEN } from '../../attack/egress-netns-probe.ts';

describe('parseAddress', () => {
  it('judges every forbidden spelling of the attack corpus in its range', () => {
    const literals = FORBIDDEN.filter((f) => !f.name);
    expect(literals.length).toBeGreaterThanOrEqual(60);
    for (const f of literals) expect(parseAddress(f.host)?.special?.range, f.host).toBe(f.range);
  });

  it('reduces each spelling to the one address the proxy dials', () => {
    const same: [string, string][] = [
      ['2130706433', '127.0.0.1'],
      ['0x7f000001', '127.0.0.1'],
      ['0177.0.0.1', '127.0.0.1'],
      ['127.1', '127.0.0.1'],
      ['127.0.0.1.', '127.0.0.1'],
      ['0', '0.0.0.0'],
      ['[0:0:0:0:0:ffff:7f00:1]', '127.0.0.1'],
      ['::FFFF:7F00:1', '127.0.0.1'],
      ['[0000:0000:0000:0000:0000:ffff:a9fe:a9fe]', '169.254.169.254'],
      ['::ffff:93.184.216.34', '93.184.216.34'],
      ['::127.0.0.1', '::7f00:1'],
      ['[0:0:0:0:0:0:0:1]', '::1'],
      ['[::]', '::'],
      ['64:FF9B::127.0.0.1', '64:ff9b::7f00:1'],
      ['FE80::1%eth0', 'fe80::1%eth0'],
      ['2606:4700:0000:0000:0000:0000:0000:1111', '2606:4700::1111'],
    ];
    for (const [written, address] of same) expect(parseAddress(written)?.address, written).toBe(address);
  });

  it('judges an embedded IPv4 as that IPv4, and names the form that carried it', () => {
    expect(describeAddress(parseAddress('64:ff9b::a9fe:a9fe')!)).toBe(
      '64:ff9b::a9fe:a9fe (link-local (cloud metadata) 169.254.0.0/16, embedded in NAT64 64:ff9b::/96)',
    );
    expect(describeAddress(parseAddress('2002:c0a8:1::1')!)).toBe('2002:c0a8:1::1 (private 192.168.0.0/16, embedded in 6to4 2002::/16)');
    expect(describeAddress(parseAddress('::7f00:1')!)).toBe('::7f00:1 (loopback 127.0.0.0/8, embedded in IPv4-compatible ::/96)');
    // A public IPv4 through NAT64 is public; through the deprecated forms the form itself is refused.
    expect(parseAddress('64:ff9b::5db8:d822')).toEqual({ address: '64:ff9b::5db8:d822', special: null });
    expect(describeAddress(parseAddress('2002:5db8:d822::1')!)).toBe('2002:5db8:d822::1 (6to4 2002::/16, embeds 93.184.216.34)');
    expect(parseAddress('::5db8:d822')?.special).toMatchObject({ range: '::/96', embeds: '93.184.216.34' });
  });

  it('refuses the other special-purpose ranges and anything outside IPv6 global unicast', () => {
    const ranges: [string, string][] = [
      ['192.31.196.1', '192.31.196.0/24'],
      ['192.88.99.1', '192.88.99.0/24'],
      ['198.19.255.255', '198.18.0.0/15'],
      ['203.0.113.9', '203.0.113.0/24'],
      ['198.51.100.1', '198.51.100.0/24'],
      ['0.1.2.3', '0.0.0.0/8'],
      ['100::1:2', '100::/64'],
      ['2001:2::1', '2001::/23'],
      ['3fff::1', '3fff::/20'],
      ['5f00::1', '5f00::/16'],
      ['::1:2:3:4', '2000::/3'],
      ['4000::1', '2000::/3'],
    ];
    for (const [a, range] of ranges) expect(parseAddress(a)?.special?.range, a).toBe(range);
  });

  it('passes public addresses', () => {
    for (const a of ['93.184.216.34', '1.1.1.1', '8.8.8.8', '2606:4700::1111', '2a00:1450:4001:80b::200e', '::ffff:1.1.1.1', '64:ff9b::101:101']) {
      expect(parseAddress(a)?.special, a).toBeNull();
    }
  });
});

describe('parseHost', () => {
  it('tells names from addresses, and refuses what is neither (the resolver never sees it)', () => {
    expect(parseHost('Registry.NPMJS.org.')).toEqual({ kind: 'name', name: 'registry.npmjs.org' });
    expect(parseHost('[::ffff:7f00:1]')).toMatchObject({ kind: 'address', address: { address: '127.0.0.1' } });
    for (const bad of ['256.0.0.1', '08.0.0.1', '1.2.3.4.5', '0x', '::ffff:0177.0.0.1', '::ffff:07f00:1', '1::2::3', 'fe80::1%eth 0', 'a b', 'x%41', '']) {
      expect(parseHost(bad).kind, bad).toBe('invalid');
    }
  });
});
