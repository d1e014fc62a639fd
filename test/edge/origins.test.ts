/** Which browser origins may use the MCP endpoint: the pure decision of src/edge/origins.ts. */
import { describe, expect, it } from 'vitest';
import { originVerdict, type OriginRules } from '../../src/edge/origins.ts';

const dev: OriginRules = { self: 'http://127.0.0.1:8787', exact: [], wildcard: [], development: true };
const prod: OriginRules = {
  self: 'https://gw.example.com',
  exact: ['https://app.example.org', 'http://localhost:3000'],
  wildcard: [['https', '.corp.example.net']],
  development: false,
};

describe('a development gateway', () => {
  it('allows every loopback origin on any port (the Inspector UI, a dev server)', () => {
    for (const o of [
      'http://localhost:6274',
      'http://127.0.0.1:5173',
      'http://[::1]:8080',
      'https://localhost',
      'http://app.localhost:3000',
      'http://127.0.0.2',
    ]) {
      expect(originVerdict(o, dev), o).toEqual({ ok: true });
    }
  });
  it('refuses every other origin, naming what is allowed', () => {
    for (const o of ['http://evil.example.com', 'http://localhost.evil.com', 'http://127.0.0.1.nip.io', 'file://', 'null', 'chrome-extension://abc']) {
      const v = originVerdict(o, dev);
      expect(v.ok, o).toBe(false);
    }
    const v = originVerdict('http://evil.example.com', dev);
    expect(v).toMatchObject({ ok: false, errorCode: 'origin_not_allowed' });
    expect(!v.ok && v.message).toContain('any loopback origin (development gateway)');
  });
});

describe('a configured deployment', () => {
  it('allows its own origin and the exact ALLOWED_ORIGINS entries (port included)', () => {
    expect(originVerdict('https://gw.example.com', prod).ok).toBe(true);
    expect(originVerdict('https://app.example.org', prod).ok).toBe(true);
    expect(originVerdict('http://localhost:3000', prod).ok).toBe(true);
    expect(originVerdict('http://localhost:3001', prod).ok).toBe(false);
    expect(originVerdict('http://localhost:6274', prod).ok).toBe(false);
    expect(originVerdict('http://app.example.org', prod).ok).toBe(false);
  });
  it('allows subdomains only where an entry says *.', () => {
    expect(originVerdict('https://a.corp.example.net', prod).ok).toBe(true);
    expect(originVerdict('https://x.y.corp.example.net', prod).ok).toBe(true);
    expect(originVerdict('https://corp.example.net', prod).ok).toBe(false);
    expect(originVerdict('https://evilcorp.example.net', prod).ok).toBe(false);
    expect(originVerdict('http://a.corp.example.net', prod).ok).toBe(false);
    expect(originVerdict('https://a.example.org', prod).ok).toBe(false);
  });
  it('a malformed Origin is refused as such', () => {
    expect(originVerdict('not a url', prod)).toMatchObject({ ok: false, errorCode: 'origin_malformed' });
  });
});
