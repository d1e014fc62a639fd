import { describe, expect, it } from 'vitest';
import { RemoteServers } from '../../src/dispatch/remote-servers.ts';
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
    expect(c.apply({ op: 'put', server: server('docs') })).toEqual({ op: 'put', replaced: false });
    expect(c.apply({ op: 'put', server: server('docs', 'v1.new.ct') })).toEqual({ op: 'put', replaced: true });
    c.apply({ op: 'put', server: server('alpha') });
    const list = c.apply({ op: 'list' });
    expect(list).toEqual({
      op: 'list',
      servers: [
        {
          id: 'alpha',
          url: 'https://alpha.example.com/mcp',
          headerNames: ['Authorization'],
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
