import { afterEach, describe, expect, it, vi } from 'vitest';
import { stamp, stampBodyEnd, TRACE_PREFIX } from '../../src/mcp/trace.ts';

describe('hot-path trace (bench only)', () => {
  afterEach(() => vi.restoreAllMocks());

  it('prints nothing and leaves the response untouched unless HOTPATH_TRACE is 1', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const res = new Response('body');
    stamp({}, 'edge.request');
    stamp({ HOTPATH_TRACE: '0' }, 'edge.request');
    expect(stampBodyEnd({}, res)).toBe(res);
    expect(warn).not.toHaveBeenCalled();
  });

  it('stamps a step, and the end of a response body after its last byte', async () => {
    const lines: string[] = [];
    vi.spyOn(console, 'warn').mockImplementation((l: string) => void lines.push(l));
    const env = { HOTPATH_TRACE: '1' };
    stamp(env, 'edge.decided');
    expect(lines[0]).toMatch(new RegExp(`^${TRACE_PREFIX} edge\\.decided \\d{13}$`));
    const res = stampBodyEnd(env, new Response('event: message\ndata: {}\n\n', { status: 200, headers: { 'content-type': 'text/event-stream' } }));
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(lines.some((l) => l.includes('edge.response_end'))).toBe(false);
    expect(await res.text()).toBe('event: message\ndata: {}\n\n');
    expect(lines.at(-1)).toMatch(/ edge\.response_end \d+$/);
  });
});
