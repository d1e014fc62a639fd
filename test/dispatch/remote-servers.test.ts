import { describe, expect, it } from 'vitest';
import { RemoteServers } from '../../src/dispatch/remote-servers.ts';
import { RemoteOAuth } from '../../src/dispatch/remote-oauth.ts';
import { sqlHost } from './sql-host.ts';

const server = (id: string, sealedHeaders = 'v1.iv.ct') => ({
  id,
  url: `https://${id}.example.com/mcp`,
  headerNames: ['Authorization'],
  sealedHeaders,
  auth: 'headers' as const,
  scope: null,
  description: null,
  createdAt: Date.UTC(2026, 0, 1),
  createdBy: 'admin-1',
});

describe('remote servers capability', () => {
  it('registers, replaces, lists without the sealed headers, and removes', () => {
    const host = sqlHost();
    const c = new RemoteServers(host);
    expect(c.apply({ op: 'put', server: server('docs') })).toEqual({ op: 'put', replaced: false, moved: false });
    expect(c.apply({ op: 'put', server: server('docs', 'v1.new.ct') })).toEqual({ op: 'put', replaced: true, moved: false });
    c.apply({ op: 'put', server: server('alpha') });
    const list = c.apply({ op: 'list' });
    expect(list).toEqual({
      op: 'list',
      servers: [
        {
          id: 'alpha',
          url: 'https://alpha.example.com/mcp',
          headerNames: ['Authorization'],
          auth: 'headers',
          scope: null,
          description: null,
          createdAt: '2026-01-01T00:00:00.000Z',
          createdBy: 'admin-1',
        },
        expect.objectContaining({ id: 'docs' }),
      ],
    });
    expect(JSON.stringify(list)).not.toContain('v1.');
    expect(c.apply({ op: 'rows' })).toMatchObject({ servers: [{ id: 'alpha' }, { id: 'docs', sealedHeaders: 'v1.new.ct' }] });
    expect(c.apply({ op: 'remove', id: 'docs' })).toEqual({ op: 'remove', removed: true });
    expect(c.apply({ op: 'remove', id: 'docs' })).toEqual({ op: 'remove', removed: false });
    // A restarted object reads the same table.
    expect(new RemoteServers(host).all().map((s) => s.id)).toEqual(['alpha']);
  });
});

describe('remote servers OAuth capability', () => {
  it('says a server moved when it is registered again at another URL or auth', () => {
    const c = new RemoteServers(sqlHost());
    c.apply({ op: 'put', server: server('docs') });
    expect(c.apply({ op: 'put', server: { ...server('docs'), auth: 'oauth' } })).toEqual({ op: 'put', replaced: true, moved: true });
    expect(c.apply({ op: 'put', server: { ...server('docs'), auth: 'oauth', url: 'https://other.example.com/mcp' } })).toMatchObject({ moved: true });
  });

  it('takes a started authorization once, and never after its expiry', () => {
    const o = new RemoteOAuth(sqlHost());
    o.apply({ op: 'begin', serverId: 'docs', nonceSha256: 'n1', sealed: 'v1.a.b', now: 1_000, expiresAt: 2_000 });
    o.apply({ op: 'begin', serverId: 'docs', nonceSha256: 'n2', sealed: 'v1.c.d', now: 1_000, expiresAt: 2_000 });
    expect(o.apply({ op: 'take', nonceSha256: 'n1', now: 1_500 })).toEqual({ op: 'take', pending: { serverId: 'docs', sealed: 'v1.a.b' } });
    // Replayed: already taken.
    expect(o.apply({ op: 'take', nonceSha256: 'n1', now: 1_500 })).toEqual({ op: 'take', pending: null });
    // Expired: refused (and gone).
    expect(o.apply({ op: 'take', nonceSha256: 'n2', now: 2_000 })).toEqual({ op: 'take', pending: null });
    expect(o.apply({ op: 'take', nonceSha256: 'unknown', now: 1_500 })).toEqual({ op: 'take', pending: null });
  });

  it('lists a connection by state, expiry and scopes — never the sealed value — and expires and drops it', () => {
    const o = new RemoteOAuth(sqlHost());
    o.apply({
      op: 'connect',
      serverId: 'docs',
      sealed: 'v1.secret.x',
      expiresAt: Date.UTC(2026, 0, 2),
      scope: 'read write',
      by: 'admin-1',
      now: Date.UTC(2026, 0, 1),
    });
    const views = o.apply({ op: 'views' });
    expect(views).toEqual({
      op: 'views',
      views: {
        docs: {
          state: 'connected',
          expiresAt: '2026-01-02T00:00:00.000Z',
          scopes: ['read', 'write'],
          connectedAt: '2026-01-01T00:00:00.000Z',
          connectedBy: 'admin-1',
        },
      },
    });
    expect(JSON.stringify(views)).not.toContain('secret');
    // Only the tokens a refresh started from are expired or replaced: one that lost a race changes nothing.
    expect(o.apply({ op: 'expire', serverId: 'docs', previous: 'v1.older.z', now: 5 })).toEqual({ op: 'expire', changed: false });
    expect(o.apply({ op: 'get', serverId: 'docs' })).toMatchObject({ connection: { state: 'connected' } });
    expect(o.apply({ op: 'expire', serverId: 'docs', previous: 'v1.secret.x', now: 5 })).toEqual({ op: 'expire', changed: true });
    expect(o.apply({ op: 'get', serverId: 'docs' })).toMatchObject({ connection: { state: 'expired' } });
    expect(o.apply({ op: 'refreshed', serverId: 'docs', previous: 'v1.older.z', sealed: 'v1.stale.w', expiresAt: null, scope: null, now: 6 })).toEqual({
      op: 'refreshed',
      changed: false,
    });
    o.apply({ op: 'refreshed', serverId: 'docs', previous: 'v1.secret.x', sealed: 'v1.new.y', expiresAt: null, scope: null, now: 6 });
    expect(o.apply({ op: 'get', serverId: 'docs' })).toMatchObject({ connection: { state: 'connected', sealed: 'v1.new.y', expiresAt: null } });
    expect(o.drop('docs')).toBe(true);
    expect(o.apply({ op: 'get', serverId: 'docs' })).toEqual({ op: 'get', connection: null });
  });
});
