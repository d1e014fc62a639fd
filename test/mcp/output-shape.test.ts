import { describe, expect, it } from 'vitest';
import { capLine, shapeRuntimeResult, statusOf, type ShapeOptions } from '../../src/mcp/output-shape.ts';
import { LINE_CAP, TRUNCATED_SUFFIX } from '../../src/contracts/tools.ts';
import type { JobExit } from '../../src/contracts/agent-protocol.ts';

const HANDLE = 'art_' + 'A'.repeat(43);
const count = (s: string) => (s ? s.split('\n').length - (s.endsWith('\n') ? 1 : 0) : 0);

function exit(o: Partial<JobExit> = {}): JobExit {
  const stdout = o.stdout ?? '';
  const stderr = o.stderr ?? '';
  return {
    type: 'job.exit',
    jobId: 'job-1',
    state: 'exited',
    exitCode: 0,
    signal: null,
    timedOut: false,
    durationMs: 1234.4,
    stdout,
    stderr,
    stdoutTruncated: false,
    stderrTruncated: false,
    streams: {
      stdout: { bytes: new TextEncoder().encode(stdout).length, lines: count(stdout), artifactTruncated: false },
      stderr: { bytes: new TextEncoder().encode(stderr).length, lines: count(stderr), artifactTruncated: false },
    },
    artifactsUploaded: true,
    ...o,
  };
}
const shape = (e: JobExit, o: Partial<ShapeOptions> = {}) => shapeRuntimeResult(e, { artifactHandle: HANDLE, outputMode: 'minimal', ...o });
const numbered = (n: number, prefix = 'out') => Array.from({ length: n }, (_, i) => `${prefix} ${i + 1}`).join('\n') + '\n';

describe('status', () => {
  it('maps terminal states to the reference statuses', () => {
    expect(statusOf({ state: 'exited', exitCode: 0, timedOut: false })).toBe('success');
    expect(statusOf({ state: 'exited', exitCode: 2, timedOut: false })).toBe('failure');
    expect(statusOf({ state: 'signaled', exitCode: null, timedOut: false })).toBe('failure');
    expect(statusOf({ state: 'failed_to_start', exitCode: null, timedOut: false })).toBe('failure');
    expect(statusOf({ state: 'lost', exitCode: null, timedOut: false })).toBe('failure');
    expect(statusOf({ state: 'timed_out', exitCode: null, timedOut: true })).toBe('timeout');
    expect(statusOf({ state: 'signaled', exitCode: null, timedOut: true })).toBe('timeout');
    expect(statusOf({ state: 'cancelled', exitCode: null, timedOut: false })).toBe('cancelled');
  });
});

describe('outputMode minimal', () => {
  it('returns only status, exit, duration, counts of the full streams and the handle', () => {
    const r = shape(exit({ stdout: numbered(50), stderr: 'warn\n', exitCode: 1 }));
    expect(r).toEqual({ status: 'failure', exitCode: 1, signal: null, durationMs: 1234, outputLines: 51, outputBytes: 346, artifactHandle: HANDLE });
  });

  it('stays small: JSON of at most 300 bytes', () => {
    const big = exit({ stdout: numbered(100_000), state: 'signaled', exitCode: null, signal: 'SIGKILL', durationMs: 599_999.9 });
    expect(JSON.stringify(shape(big)).length).toBeLessThanOrEqual(300);
  });

  it('passes phase through and a null handle when there is no artifact', () => {
    expect(shape(exit({ phase: 'build', exitCode: 1 }), { artifactHandle: null })).toMatchObject({ phase: 'build', artifactHandle: null, status: 'failure' });
  });
});

describe('outputMode summary', () => {
  it('returns short output whole', () => {
    const r = shape(exit({ stdout: 'a\r\nb\n', stderr: 'oops\n' }), { outputMode: 'summary' });
    expect(r.stdoutSummary).toBe('a\nb');
    expect(r.stderrSummary).toBe('oops');
    expect(r.excerpts).toBeUndefined();
  });

  it('keeps head and tail of maxResponseLines/2 each with a marker for the omitted middle', () => {
    const r = shape(exit({ stdout: numbered(500) }), { outputMode: 'summary', maxResponseLines: 10 });
    const lines = r.stdoutSummary!.split('\n');
    expect(lines.slice(0, 5)).toEqual(['out 1', 'out 2', 'out 3', 'out 4', 'out 5']);
    expect(lines[5]).toContain('490 lines omitted');
    expect(lines[5]).toContain(HANDLE);
    expect(lines.slice(6)).toEqual(['out 496', 'out 497', 'out 498', 'out 499', 'out 500']);
  });

  it('defaults to 100 lines (50 + 50) and gives stderr a tail only', () => {
    const r = shape(exit({ stdout: numbered(1000), stderr: numbered(200, 'err') }), { outputMode: 'summary' });
    const out = r.stdoutSummary!.split('\n');
    expect(out).toHaveLength(101);
    expect(out[49]).toBe('out 50');
    expect(out[51]).toBe('out 951');
    const err = r.stderrSummary!.split('\n');
    expect(err).toHaveLength(51);
    expect(err[0]).toContain('150 lines omitted');
    expect(err[50]).toBe('err 200');
  });

  it('takes the tail from the real end of the output when the inline copy was cut', () => {
    const inline = numbered(300);
    const e = exit({ stdout: inline, stdoutTruncated: true });
    e.streams.stdout = { bytes: 5_000_000, lines: 100_000, artifactTruncated: false };
    const r = shape(e, { outputMode: 'summary', maxResponseLines: 10, tails: { stdout: 'out 99998\nout 99999\nout 100000\n' } });
    const lines = r.stdoutSummary!.split('\n');
    expect(lines.slice(0, 5)).toEqual(['out 1', 'out 2', 'out 3', 'out 4', 'out 5']);
    expect(lines[5]).toContain('99992 lines omitted');
    expect(lines.slice(6)).toEqual(['out 99998', 'out 99999', 'out 100000']);
  });

  it('does not repeat head lines in the tail when the stream is only a little over the inline cap', () => {
    const long = (i: number) => `${i}:` + 'z'.repeat(3000);
    const full = Array.from({ length: 8 }, (_, i) => long(i + 1)).join('\n') + '\n';
    const e = exit({ stdout: full.slice(0, 10_000), stdoutTruncated: true });
    e.streams.stdout = { bytes: full.length, lines: 8, artifactTruncated: false };
    const r = shape(e, { outputMode: 'summary', maxResponseLines: 10, tails: { stdout: full.slice(full.length - 16_000).replace(/^[^\n]*\n/, '') } });
    expect(r.stdoutSummary!.split('\n').map((l) => l.split(':')[0])).toEqual(['1', '2', '3', '4', '5', '6', '7', '8']);
  });

  it('says so when the inline copy was cut and no real tail is at hand', () => {
    const e = exit({ stdout: numbered(300), stdoutTruncated: true });
    e.streams.stdout = { bytes: 5_000_000, lines: 100_000, artifactTruncated: false };
    const lines = shape(e, { outputMode: 'summary', maxResponseLines: 10 }).stdoutSummary!.split('\n');
    expect(lines).toHaveLength(11);
    expect(lines[10]).toMatch(/truncated after 300 of 100000 lines/);
  });

  it('adds excerpts for queryTerms', () => {
    const r = shape(exit({ stdout: numbered(50, 'x').replace('x 20\n', 'x 20 FAILED\n') }), { outputMode: 'summary', queryTerms: ['failed'], contextLines: 1 });
    expect(r.excerpts).toEqual([{ lineStart: 19, lineEnd: 21, content: 'x 19\nx 20 FAILED\nx 21', source: 'stdout' }]);
    expect(r.stdoutSummary).toBeDefined();
  });
});

describe('outputMode intent', () => {
  it('returns only excerpts of matching lines, no head or tail', () => {
    const e = exit({ stdout: numbered(100).replace('out 40\n', 'out 40 error\n'), stderr: 'fine\nError: x\n', exitCode: 1 });
    const r = shape(e, { outputMode: 'intent', queryTerms: ['ERROR'], contextLines: 0 });
    expect(r.stdoutSummary).toBeUndefined();
    expect(r.stderrSummary).toBeUndefined();
    expect(r.excerpts).toEqual([
      { lineStart: 40, lineEnd: 40, content: 'out 40 error', source: 'stdout' },
      { lineStart: 2, lineEnd: 2, content: 'Error: x', source: 'stderr' },
    ]);
    expect(r.notes).toBeUndefined();
  });

  it('uses 3 lines of context by default', () => {
    const r = shape(exit({ stdout: numbered(100).replace('out 40\n', 'out 40 hit\n') }), { outputMode: 'intent', queryTerms: ['hit'] });
    expect(r.excerpts).toEqual([expect.objectContaining({ lineStart: 37, lineEnd: 43 })]);
  });

  it('returns an empty list when nothing matches', () => {
    expect(shape(exit({ stdout: 'a\n' }), { outputMode: 'intent', queryTerms: ['zzz'] }).excerpts).toEqual([]);
  });

  it('keeps excerpts within maxResponseLines and points to query_output for the rest', () => {
    const r = shape(exit({ stdout: numbered(1000, 'hit') }), { outputMode: 'intent', queryTerms: ['hit'], maxResponseLines: 20 });
    const total = r.excerpts!.reduce((n, e) => n + e.content.split('\n').length, 0);
    expect(total).toBe(20);
    expect(r.excerpts!.every((e) => e.content.split('\n').length === e.lineEnd - e.lineStart + 1)).toBe(true);
    expect(r.notes![0]).toContain('1000 matching lines');
    expect(r.notes![0]).toContain(HANDLE);
  });

  it('notes that the inline output was cut, so later lines were not searched', () => {
    const r = shape(exit({ stdout: 'a\nhit\n', stdoutTruncated: true }), { outputMode: 'intent', queryTerms: ['hit'] });
    expect(r.notes![0]).toMatch(/inline output was truncated/);
  });
});

describe('line cap', () => {
  const long = 'y'.repeat(LINE_CAP + 100);
  const capped = 'y'.repeat(LINE_CAP) + TRUNCATED_SUFFIX;

  it('capLine cuts lines longer than LINE_CAP', () => {
    expect(capLine(long)).toBe(capped);
    expect(capLine('short')).toBe('short');
  });

  it('caps every returned line in summaries and excerpts', () => {
    const e = exit({ stdout: `${long}\n${long} match\n`, stderr: `${long}\n` });
    const s = shape(e, { outputMode: 'summary', queryTerms: ['match'] });
    expect(s.stdoutSummary).toBe(`${capped}\n${capped}`);
    expect(s.stderrSummary).toBe(capped);
    expect(s.excerpts![0].content).toBe(`${capped}\n${capped}`);
    const t = shape(e, { outputMode: 'summary', tails: { stdout: long }, maxResponseLines: 2 });
    for (const line of [t.stdoutSummary!, t.stderrSummary!].join('\n').split('\n')) expect(line.length).toBeLessThanOrEqual(LINE_CAP + TRUNCATED_SUFFIX.length);
  });
});
