import { McpServer } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildServer, TOOL_COSTS } from '../../src/mcp/server.ts';
import type { ToolContext } from '../../src/governed/call-context.ts';

// run_script's host extends the Workers runtime's RpcTarget; registering the tools never builds one.
vi.mock('cloudflare:workers', () => ({ RpcTarget: class {}, DurableObject: class {} }));

describe('what a tool call may cost', () => {
  afterEach(() => vi.restoreAllMocks());

  it('every tool the server registers has its subrequest cost, for the batch check', () => {
    const register = vi.spyOn(McpServer.prototype, 'registerTool');
    const ctx = { env: {}, principal: { team: 't', subject: 's', scopes: [], tokenId: 'tk', issuer: 'i' }, era: 'modern', waitUntil: () => {} };
    buildServer(ctx as unknown as ToolContext);
    const names = register.mock.calls.map((c) => c[0]);
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((n) => !Object.hasOwn(TOOL_COSTS, n))).toEqual([]);
  });
});
