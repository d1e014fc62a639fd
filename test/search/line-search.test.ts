import { describe, expect, it } from 'vitest';
import { searchStream, searchText, capLine, LineSearch, type SearchOptions } from '../../src/search/line-search.ts';
import { LINE_CAP, TRUNCATED_SUFFIX, type Excerpt } from '../../src/contracts/tools.ts';
import { opts, streamOf } from '../support/search-input.ts';

const enc = new TextEncoder();

const numbered = (n: number, mark: (i: number) => string = () => '') => Array.from({ length: n }, (_, i) => `line ${i + 1}${mark(i + 1)}`).join('\n') + '\n';

/** The obvious whole-text implementation, to compare the streaming one against. */
function naive(text: string, o: SearchOptions): { excerpts: Excerpt[]; matchCount: number; totalLines: number } {
  const lines = text.length ? text.split('\n') : [];
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const clean = lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  const terms = o.terms.map((t) => t.toLowerCase());
  const hits = clean.map((l, i) => (terms.some((t) => l.toLowerCase().includes(t)) ? i + 1 : 0)).filter(Boolean);
  const windows: [number, number][] = [];
  for (const h of hits) {
    const s = Math.max(1, h - o.contextLines);
    const e = Math.min(clean.length, h + o.contextLines);
    const last = windows[windows.length - 1];
    if (last && s <= last[1] + 1) last[1] = Math.max(last[1], e);
    else windows.push([s, e]);
  }
  const excerpts = windows.slice(0, o.maxExcerpts).map(([s, e]) => ({
    lineStart: s,
    lineEnd: e,
    content: clean
      .slice(s - 1, e)
      .map(capLine)
      .join('\n'),
    source: o.source,
  }));
  return { excerpts, matchCount: hits.length, totalLines: clean.length };
}

describe('searchStream: excerpts', () => {
  it('returns 1-based line numbers with context around each match', async () => {
    const text = numbered(30, (i) => (i === 10 ? ' ERROR: boom' : ''));
    const r = await searchStream(streamOf(enc.encode(text)), opts({ terms: ['error'], contextLines: 2 }));
    expect(r.excerpts).toEqual([{ lineStart: 8, lineEnd: 12, content: 'line 8\nline 9\nline 10 ERROR: boom\nline 11\nline 12', source: 'stdout' }]);
    expect(r.matchCount).toBe(1);
    expect(r.totalLines).toBe(30);
    expect(r.totalBytes).toBe(enc.encode(text).length);
  });

  it('merges overlapping windows into one excerpt', async () => {
    const text = numbered(30, (i) => (i === 5 || i === 8 ? ' hit' : ''));
    const r = await searchStream(streamOf(enc.encode(text)), opts({ terms: ['hit'], contextLines: 3 }));
    expect(r.excerpts.map((e) => [e.lineStart, e.lineEnd])).toEqual([[2, 11]]);
    expect(r.matchCount).toBe(2);
  });

  it('merges adjacent windows, and keeps windows with a gap apart', async () => {
    // ±3 around 5 is 2..8, around 12 is 9..15: adjacent. Around 13 it would be 10..16: a gap at 9.
    const adjacent = await searchStream(streamOf(enc.encode(numbered(30, (i) => (i === 5 || i === 12 ? ' hit' : '')))), opts({ terms: ['hit'] }));
    expect(adjacent.excerpts.map((e) => [e.lineStart, e.lineEnd])).toEqual([[2, 15]]);
    const apart = await searchStream(streamOf(enc.encode(numbered(30, (i) => (i === 5 || i === 13 ? ' hit' : '')))), opts({ terms: ['hit'] }));
    expect(apart.excerpts.map((e) => [e.lineStart, e.lineEnd])).toEqual([
      [2, 8],
      [10, 16],
    ]);
  });

  it('clips context at the start and end of the output', async () => {
    const r = await searchStream(streamOf(enc.encode(numbered(10, (i) => (i === 1 || i === 10 ? ' x!' : '')))), opts({ terms: ['x!'], contextLines: 2 }));
    expect(r.excerpts.map((e) => [e.lineStart, e.lineEnd])).toEqual([
      [1, 3],
      [8, 10],
    ]);
  });

  it('keeps at most maxExcerpts windows but counts every matching line', async () => {
    const text = numbered(1000, (i) => (i % 50 === 0 ? ' needle' : ''));
    const r = await searchStream(streamOf(enc.encode(text)), opts({ terms: ['needle'], maxExcerpts: 3, contextLines: 1 }));
    expect(r.excerpts.map((e) => e.lineStart)).toEqual([49, 99, 149]);
    expect(r.matchCount).toBe(20);
    expect(r.totalLines).toBe(1000);
  });

  it('with contextLines 0 returns only the matching lines', async () => {
    const r = await searchStream(
      streamOf(enc.encode(numbered(10, (i) => (i === 3 || i === 4 || i === 7 ? ' m' : '')))),
      opts({ terms: [' m'], contextLines: 0 }),
    );
    expect(r.excerpts).toEqual([
      { lineStart: 3, lineEnd: 4, content: 'line 3 m\nline 4 m', source: 'stdout' },
      { lineStart: 7, lineEnd: 7, content: 'line 7 m', source: 'stdout' },
    ]);
  });

  it('matches case-insensitively, any of several terms, and labels the source', async () => {
    const text = 'a\nFatal Error\nb\nwarning: x\nc\nWARNING again\n';
    const r = await searchStream(streamOf(enc.encode(text)), opts({ terms: ['ERROR', 'Warning'], contextLines: 0, source: 'stderr' }));
    expect(r.excerpts.map((e) => e.content)).toEqual(['Fatal Error', 'warning: x', 'WARNING again']);
    expect(r.excerpts.every((e) => e.source === 'stderr')).toBe(true);
    expect(r.matchCount).toBe(3);
  });

  it('reports no excerpts and zero matches when nothing matches', async () => {
    const r = await searchStream(streamOf(enc.encode(numbered(100))), opts({ terms: ['absent'] }));
    expect(r).toMatchObject({ excerpts: [], matchCount: 0, totalLines: 100 });
  });

  it('splits one long run of matches into excerpts of at most maxExcerptLines lines', async () => {
    const text = numbered(1000, () => ' all');
    const r = await searchStream(streamOf(enc.encode(text)), opts({ terms: ['all'], maxExcerptLines: 200, maxExcerpts: 50 }));
    expect(r.excerpts.map((e) => [e.lineStart, e.lineEnd])).toEqual([
      [1, 200],
      [201, 400],
      [401, 600],
      [601, 800],
      [801, 1000],
    ]);
    expect(r.matchCount).toBe(1000);
  });

  it('starts a new excerpt for a match whose leading context filled the previous one to maxExcerptLines', async () => {
    const text = numbered(20, (i) => (i === 2 || i === 7 ? ' hit' : ''));
    const r = await searchStream(streamOf(enc.encode(text)), opts({ terms: ['hit'], contextLines: 3, maxExcerptLines: 5 }));
    expect(r.excerpts.map((e) => [e.lineStart, e.lineEnd])).toEqual([
      [1, 5],
      [6, 10],
    ]);
    expect(r.excerpts.every((e) => e.content.split('\n').length === e.lineEnd - e.lineStart + 1)).toBe(true);
    expect(r.matchCount).toBe(2);
  });

  it('never returns overlapping excerpts or more lines than maxExcerptLines, for random inputs', async () => {
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    for (let round = 0; round < 300; round++) {
      const n = 1 + rnd(80);
      const text = numbered(n, () => (rnd(3) === 0 ? ' hit' : ''));
      const o = opts({ terms: ['hit'], contextLines: rnd(5), maxExcerpts: 1 + rnd(8), maxExcerptLines: 1 + rnd(12) });
      const r = await searchStream(streamOf(enc.encode(text), [1 + rnd(40)]), o);
      const all = text.split('\n');
      let prevEnd = 0;
      for (const e of r.excerpts) {
        const ctx = JSON.stringify({ n, o, e });
        expect(e.lineStart, ctx).toBeGreaterThan(prevEnd);
        expect(e.lineEnd - e.lineStart + 1, ctx).toBeLessThanOrEqual(o.maxExcerptLines!);
        expect(e.content, ctx).toBe(all.slice(e.lineStart - 1, e.lineEnd).join('\n'));
        prevEnd = e.lineEnd;
      }
      expect(r.excerpts.length).toBeLessThanOrEqual(o.maxExcerpts);
      const hits = all.filter((l) => l.endsWith(' hit')).length;
      expect(r.matchCount).toBe(hits);
      // Every match up to the last excerpt's end is inside some excerpt, unless excerpts ran out.
      if (r.excerpts.length < o.maxExcerpts) {
        all.forEach((l, i) => {
          if (l.endsWith(' hit'))
            expect(
              r.excerpts.some((e) => e.lineStart <= i + 1 && i + 1 <= e.lineEnd),
              `line ${i + 1} ${JSON.stringify({ n, o })}`,
            ).toBe(true);
        });
      }
    }
  });
});

describe('searchStream: lines and bytes', () => {
  it('finds a term split across chunk boundaries (every chunking)', async () => {
    const text = 'x'.repeat(37) + ' deadbeef-TOKEN ' + 'y'.repeat(20) + '\nnext\n';
    for (const size of [1, 2, 3, 5, 8, 13, 40, 41, 42, 43]) {
      const r = await searchStream(streamOf(enc.encode(text), [size]), opts({ terms: ['beef-token'], contextLines: 0 }));
      expect(r.matchCount, `chunk size ${size}`).toBe(1);
      expect(r.excerpts[0].lineStart).toBe(1);
    }
  });

  it('decodes multi-byte characters split across chunks', async () => {
    const text = 'grüße aus Köln — 東京 🚀 Ünïcode\nplain\n';
    const r = await searchStream(streamOf(enc.encode(text), [1]), opts({ terms: ['köln', '🚀'], contextLines: 0 }));
    expect(r.excerpts[0].content).toBe('grüße aus Köln — 東京 🚀 Ünïcode');
    expect(r.totalBytes).toBe(enc.encode(text).length);
  });

  it('treats CRLF as a line break, even when \\r and \\n arrive in different chunks', async () => {
    const text = 'one\r\ntwo ERR\r\nthree\r\n';
    for (const sizes of [[65536], [1], [4], [8, 1]]) {
      const r = await searchStream(streamOf(enc.encode(text), sizes), opts({ terms: ['err'], contextLines: 1 }));
      expect(r.excerpts).toEqual([{ lineStart: 1, lineEnd: 3, content: 'one\ntwo ERR\nthree', source: 'stdout' }]);
      expect(r.totalLines).toBe(3);
    }
  });

  it('decodes invalid UTF-8 with replacement characters and keeps searching', async () => {
    const bytes = new Uint8Array([...enc.encode('ok\nbad '), 0xff, 0xfe, 0xc3, ...enc.encode(' MATCH\nend\n')]);
    const r = await searchStream(streamOf(bytes, [1]), opts({ terms: ['match'], contextLines: 1 }));
    expect(r.excerpts[0].content).toContain('bad \uFFFD\uFFFD\uFFFD MATCH');
    expect(r.excerpts[0].lineStart).toBe(1);
    expect(r.totalLines).toBe(3);
  });

  it('counts a last line without a newline, and no line for empty input', async () => {
    expect(await searchStream(streamOf(enc.encode('a\nb')), opts({ terms: ['b'], contextLines: 0 }))).toMatchObject({ totalLines: 2, matchCount: 1 });
    expect(await searchStream(streamOf(new Uint8Array()), opts({ terms: ['b'] }))).toEqual({ excerpts: [], matchCount: 0, totalLines: 0, totalBytes: 0 });
    expect(await searchStream(streamOf(enc.encode('\n\n')), opts({ terms: ['b'] }))).toMatchObject({ totalLines: 2 });
  });

  it('caps 600-char lines at LINE_CAP with the truncated suffix, and still matches past the cap', async () => {
    const long = 'a'.repeat(550) + 'NEEDLE' + 'b'.repeat(44);
    expect(long.length).toBe(600);
    for (const sizes of [[65536], [7], [499, 2, 1, 300]]) {
      const r = await searchStream(streamOf(enc.encode(`short\n${long}\n${long}\r\n`), sizes), opts({ terms: ['needle'], contextLines: 1 }));
      const lines = r.excerpts[0].content.split('\n');
      expect(lines[0]).toBe('short');
      expect(lines[1]).toBe('a'.repeat(LINE_CAP) + TRUNCATED_SUFFIX);
      expect(lines[2]).toBe('a'.repeat(LINE_CAP) + TRUNCATED_SUFFIX);
      expect(r.matchCount).toBe(2);
    }
  });

  it('does not cap a line of exactly LINE_CAP chars (with or without CR)', async () => {
    const exact = 'z'.repeat(LINE_CAP);
    for (const sizes of [[65536], [3]]) {
      const r = await searchStream(streamOf(enc.encode(`${exact}\r\n${exact}z\r\n`), sizes), opts({ terms: ['z'], contextLines: 0 }));
      expect(r.excerpts[0].content.split('\n')).toEqual([exact, exact + TRUNCATED_SUFFIX]);
    }
  });

  it('agrees with a whole-text implementation for random inputs and chunkings', async () => {
    let seed = 42;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    const words = ['foo', 'BAR', 'baz', 'Error', 'x', '', 'é', 'warn', '\r'];
    for (let round = 0; round < 200; round++) {
      const n = rnd(60);
      const lines = Array.from({ length: n }, () => Array.from({ length: rnd(6) }, () => words[rnd(words.length)]).join(' '));
      const text = lines.join('\n') + (rnd(2) ? '\n' : '');
      const o = opts({ terms: rnd(2) ? ['error'] : ['bar', 'WARN'], contextLines: rnd(4), maxExcerpts: 1 + rnd(5), maxExcerptLines: 10_000 });
      const r = await searchStream(streamOf(enc.encode(text), [1 + rnd(10), 1 + rnd(30)]), o);
      const want = naive(text, o);
      expect({ excerpts: r.excerpts, matchCount: r.matchCount, totalLines: r.totalLines }, JSON.stringify({ text, o })).toEqual(want);
    }
  });
});

describe('LineSearch: any chunking of the decoded text', () => {
  it('agrees with a whole-text implementation when fed in random string pieces, with rare matches', () => {
    let seed = 7;
    const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    const words = ['foo', 'bar', 'baz', 'x', '', 'é', 'warn', '\r', 'qux', 'lorem', 'ipsum'];
    for (let round = 0; round < 300; round++) {
      const n = rnd(200);
      const lines = Array.from({ length: n }, () =>
        rnd(25) === 0 ? 'Fatal ERROR here' : Array.from({ length: rnd(5) }, () => words[rnd(words.length)]).join(' '),
      );
      const text = lines.join('\n') + (rnd(2) ? '\n' : '');
      const o = opts({ terms: rnd(3) ? ['error'] : ['error', 'WARN'], contextLines: rnd(5), maxExcerpts: 1 + rnd(6), maxExcerptLines: 10_000 });
      const s = new LineSearch(o);
      // Either one piece (the batched path) or many small ones (lines split across pushes).
      for (let i = 0; i < text.length; ) {
        const step = rnd(2) ? text.length : 1 + rnd(40);
        s.push(text.slice(i, i + step));
        i += step;
      }
      const r = s.finish(0);
      expect({ excerpts: r.excerpts, matchCount: r.matchCount, totalLines: r.totalLines }, JSON.stringify({ text, o })).toEqual(naive(text, o));
    }
  });
});

describe('searchStream: bounded memory', () => {
  /**
   * Peak heap growth while a stream is consumed. Sampled from the stream's own pull(): the
   * search never yields to timers, so an interval would not see the peak.
   */
  function heapProbe() {
    const before = process.memoryUsage().heapUsed;
    let peak = before;
    return {
      sample: () => {
        peak = Math.max(peak, process.memoryUsage().heapUsed);
      },
      growth: () => peak - before,
    };
  }

  /** A generated stream of `mb` megabytes of log lines; never held in memory as a whole. */
  function generated(mb: number, line: (i: number) => string, sample: () => void): ReadableStream<Uint8Array> {
    const total = mb * 1024 * 1024;
    let sent = 0;
    let i = 0;
    return new ReadableStream<Uint8Array>({
      pull(c) {
        sample();
        if (sent >= total) return c.close();
        let s = '';
        while (s.length < 64 * 1024) s += line(++i) + '\n';
        const b = enc.encode(s);
        sent += b.length;
        c.enqueue(b);
      },
    });
  }

  it('searches a 64 MB stream of log lines in bounded memory', async () => {
    const probe = heapProbe();
    const body = generated(
      64,
      (i) => (i % 25_000 === 0 ? `[${i}] error TS2345: Argument of type 'string'` : `[${i}] compiling src/module_${i % 977}.ts ... ok`),
      probe.sample,
    );
    const r = await searchStream(body, opts({ terms: ['error TS'], maxExcerpts: 5 }));
    expect(r.totalBytes).toBeGreaterThanOrEqual(64 * 1024 * 1024);
    expect(r.totalLines).toBeGreaterThan(1_000_000);
    expect(r.matchCount).toBe(Math.floor(r.totalLines / 25_000));
    expect(r.excerpts).toHaveLength(5);
    expect(r.excerpts[0].lineStart).toBe(25_000 - 3);
    // Holding the input (or its lines) would show here as 64+ MB; young-generation garbage stays well below.
    expect(probe.growth()).toBeLessThan(32 * 1024 * 1024);
  });

  it('does not accumulate a single 64 MB line beyond the cap', async () => {
    const chunk = 'x'.repeat(64 * 1024);
    let n = 0;
    const probe = heapProbe();
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        probe.sample();
        n++;
        if (n <= 1024) c.enqueue(enc.encode(chunk));
        else if (n === 1025) c.enqueue(enc.encode('TAIL-MARK\nafter\n'));
        else c.close();
      },
    });
    const r = await searchStream(body, opts({ terms: ['tail-mark'], contextLines: 1 }));
    expect(r.matchCount).toBe(1);
    expect(r.totalLines).toBe(2);
    expect(r.excerpts[0].content).toBe('x'.repeat(LINE_CAP) + TRUNCATED_SUFFIX + '\nafter');
    expect(probe.growth()).toBeLessThan(32 * 1024 * 1024);
  });
});

describe('searchText', () => {
  it('gives the same result as searchStream on the same text', async () => {
    const text = numbered(200, (i) => (i % 17 === 0 ? ' Warn' : ''));
    const o = opts({ terms: ['warn'], maxExcerpts: 4, contextLines: 2 });
    expect(searchText(text, o)).toEqual(await searchStream(streamOf(enc.encode(text), [100]), o));
  });
});

describe('capLine', () => {
  it('leaves lines up to LINE_CAP alone and cuts longer ones with the suffix', () => {
    expect(capLine('a'.repeat(LINE_CAP))).toBe('a'.repeat(LINE_CAP));
    expect(capLine('a'.repeat(LINE_CAP + 1))).toBe('a'.repeat(LINE_CAP) + TRUNCATED_SUFFIX);
  });
  it('never leaves half a surrogate pair at the cut', () => {
    const s = 'a'.repeat(LINE_CAP - 1) + '🚀' + 'b';
    expect(capLine(s)).toBe('a'.repeat(LINE_CAP - 1) + TRUNCATED_SUFFIX);
  });
});
