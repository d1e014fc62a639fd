import { Hono } from 'hono';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { TRACE_PREFIX } from '../../src/contracts/trace.ts';

type Trace = typeof import('../../src/mcp/trace.ts') & typeof import('../../src/contracts/trace.ts');

/** The Worker's trace (the stamp in src/contracts/trace.ts, the route's marks in src/mcp/trace.ts) as a build with (`--define GATEHOUSE_TRACE:true`) or without the trace sees it. */
async function traceModule(traced: boolean): Promise<Trace> {
  vi.resetModules();
  if (traced) vi.stubGlobal('GATEHOUSE_TRACE', true);
  return { ...(await import('../../src/contracts/trace.ts')), ...(await import('../../src/mcp/trace.ts')) };
}

/** A route shaped like the MCP route: a mark first, a middleware, a mark after it. */
function route(t: Trace): Hono {
  const app = new Hono();
  app.use('*', ...t.traceMark('edge.request'), async (_c, next) => next(), ...t.traceMark('edge.authenticated'));
  app.get('/', (c) => c.body('event: message\ndata: {}\n\n', 200, { 'content-type': 'text/event-stream' }));
  return app;
}

describe('hot-path trace (a bench build only)', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllGlobals();
  });

  it('a build without the trace has no trace middleware and prints nothing, whatever the vars say', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const t = await traceModule(false);
    expect(t.TRACING).toBe(false);
    expect(t.traceMark('edge.request')).toEqual([]);
    t.stamp({ HOTPATH_TRACE: '1' }, 'edge.decided');
    const res = await route(t).request('/');
    expect(await res.text()).toBe('event: message\ndata: {}\n\n');
    expect(warn).not.toHaveBeenCalled();
  });

  it('a traced build stamps each mark as a request passes it, and the end of the response body after its last byte', async () => {
    const lines: string[] = [];
    vi.spyOn(console, 'warn').mockImplementation((l: string) => void lines.push(l));
    const t = await traceModule(true);
    expect(t.TRACING).toBe(true);
    t.stamp({}, 'edge.decided');
    expect(lines[0]).toMatch(new RegExp(`^${TRACE_PREFIX} edge\\.decided \\d{13}$`));
    const res = await route(t).request('/');
    expect(lines.slice(1).map((l) => l.split(' ')[1])).toEqual(['edge.request', 'edge.authenticated']);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(lines.some((l) => l.includes('edge.response_end'))).toBe(false);
    expect(await res.text()).toBe('event: message\ndata: {}\n\n');
    expect(lines.at(-1)).toMatch(new RegExp(`^${TRACE_PREFIX} edge\\.response_end \\d{13}$`));
  });
});
