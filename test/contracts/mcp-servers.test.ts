import { describe, expect, it } from 'vitest';
import { parseMcpJson, RemoteServerInput } from '../../src/contracts/mcp-servers.ts';

describe('.mcp.json', () => {
  it('reads the standard mcpServers shape, filling args and env', () => {
    const r = parseMcpJson(
      JSON.stringify({ mcpServers: { fs: { command: 'npx', args: ['server-filesystem', '.'] }, everything: { command: 'server-everything' } } }),
    );
    expect(r).toEqual({
      ok: true,
      servers: { fs: { command: 'npx', args: ['server-filesystem', '.'], env: {} }, everything: { command: 'server-everything', args: [], env: {} } },
    });
  });

  it('names the file and the key that is wrong', () => {
    expect(parseMcpJson('{"mcpServers": {"fs": {"args": []}}}')).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^\.mcp\.json: mcpServers\.fs\.command: /),
    });
    expect(parseMcpJson('{"mcpServers": {"fs": {"command": "x", "env": {"A": 1}}}}')).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^\.mcp\.json: mcpServers\.fs\.env\.A: /),
    });
    expect(parseMcpJson('{"servers": {}}')).toMatchObject({ ok: false, message: expect.stringMatching(/^\.mcp\.json: mcpServers: /) });
    expect(parseMcpJson('{"mcpServers": {"bad id!": {"command": "x"}}}')).toMatchObject({
      ok: false,
      message: expect.stringContaining('a server id is 1 to 64 characters'),
    });
  });

  it('says when the file is not JSON', () => {
    expect(parseMcpJson('{mcpServers')).toMatchObject({ ok: false, message: expect.stringMatching(/^\.mcp\.json: not valid JSON/) });
  });
});

describe('a remote server registration', () => {
  it('takes an http(s) URL and headers (authenticating with those headers alone unless it says oauth)', () => {
    expect(RemoteServerInput.parse({ url: 'https://mcp.example.com/mcp', headers: { Authorization: 'Bearer x' } })).toEqual({
      url: 'https://mcp.example.com/mcp',
      headers: { Authorization: 'Bearer x' },
      auth: 'headers',
    });
  });

  it('takes auth "oauth" with scopes, without an Authorization header (the gateway sets it)', () => {
    expect(RemoteServerInput.parse({ url: 'https://mcp.example.com/mcp', auth: 'oauth', scope: 'read write' })).toEqual({
      url: 'https://mcp.example.com/mcp',
      headers: {},
      auth: 'oauth',
      scope: 'read write',
    });
    expect(RemoteServerInput.safeParse({ url: 'https://x/', auth: 'oauth', headers: { authorization: 'Bearer x' } }).error?.issues[0]?.message).toMatch(
      /sends the Authorization header itself/,
    );
    expect(RemoteServerInput.safeParse({ url: 'https://x/', scope: 'read' }).error?.issues[0]?.message).toMatch(/scope is for auth "oauth"/);
    expect(RemoteServerInput.safeParse({ url: 'https://x/', auth: 'oauth', scope: 'a\u0022b' }).success).toBe(false);
  });

  it('refuses credentials in the URL, other schemes and headers the transport owns', () => {
    expect(RemoteServerInput.safeParse({ url: 'https://u:p@mcp.example.com/' }).error?.issues[0]?.message).toMatch(/must not carry credentials/);
    expect(RemoteServerInput.safeParse({ url: 'file:///etc/passwd' }).error?.issues[0]?.message).toMatch(/http: or https:/);
    expect(RemoteServerInput.safeParse({ url: 'https://x/', headers: { 'Mcp-Session-Id': 'x' } }).error?.issues[0]?.message).toMatch(/may not set/);
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`H${i}`, 'v']));
    expect(RemoteServerInput.safeParse({ url: 'https://x/', headers: many }).success).toBe(false);
  });
});
