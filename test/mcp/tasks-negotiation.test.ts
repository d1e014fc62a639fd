/**
 * Who may get a task: a 2026-07-28 request that declares the extension in its own client
 * capabilities with an object (the extension has no settings), and that did not ask for
 * `background`. Anything else — another era, a missing, null, `true` or array entry — gets none.
 */
import { describe, expect, it } from 'vitest';
import { declaresTasks, taskOffer, TASK_AFTER_MS } from '../../src/mcp/tasks/negotiation.ts';
import type { ToolContext, ToolExtra } from '../../src/governed/call-context.ts';

const ctx = (era: 'legacy' | 'modern') => ({ era }) as unknown as ToolContext;
const extra = (ext: unknown, where: 'envelope' | '_meta' = 'envelope') => {
  const caps = ext === undefined ? {} : { extensions: { 'io.modelcontextprotocol/tasks': ext } };
  const meta = { 'io.modelcontextprotocol/clientCapabilities': caps };
  return { mcpReq: where === 'envelope' ? { envelope: meta } : { _meta: meta } } as unknown as ToolExtra;
};

describe('task negotiation', () => {
  it('a 2026-07-28 request that declares the extension may get a task', () => {
    expect(declaresTasks(ctx('modern'), extra({}))).toBe(true);
    expect(declaresTasks(ctx('modern'), extra({}, '_meta'))).toBe(true);
    expect(taskOffer(ctx('modern'), extra({}), {})).toEqual({ afterMs: TASK_AFTER_MS });
  });

  it('no declaration, a malformed one, a 2025-era request or background: true never gets one', () => {
    for (const bad of [undefined, null, true, [], 'yes']) expect(declaresTasks(ctx('modern'), extra(bad)), String(bad)).toBe(false);
    expect(declaresTasks(ctx('legacy'), extra({}))).toBe(false);
    expect(taskOffer(ctx('modern'), extra({}), { background: true })).toBeUndefined();
    expect(taskOffer(ctx('modern'), extra(undefined), {})).toBeUndefined();
  });
});
