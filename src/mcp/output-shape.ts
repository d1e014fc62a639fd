/**
 * Shapes runtime_execute's result by `outputMode` (the governed-runtime contract, docs/architecture.md): `minimal` spends ~50 tokens
 * (status, counts, artifact handle), `summary` adds head + tail, `intent` returns only the lines
 * matching queryTerms. Pure: the caller passes the job's exit and, when the inline copy was cut,
 * the real end of each stream read from the artifact.
 */
import { z } from 'zod';
import { RuntimeExecuteOutput, type Excerpt } from '../contracts/tools.ts';
import type { JobExit, StreamName } from '../contracts/agent-protocol.ts';
import { capLine, searchText } from '../search/line-search.ts';

export { capLine };

const RuntimeExecuteStructured = z.object(RuntimeExecuteOutput);
export type RuntimeExecuteStructured = z.infer<typeof RuntimeExecuteStructured>;
export type RuntimeStatus = RuntimeExecuteStructured['status'];

const DEFAULT_MAX_RESPONSE_LINES = 100;
const DEFAULT_CONTEXT_LINES = 3;
/** Excerpt windows returned inline; query_output finds the rest. */
const INLINE_MAX_EXCERPTS = 10;

export interface ShapeOptions {
  artifactHandle: string | null;
  outputMode: 'minimal' | 'summary' | 'intent';
  queryTerms?: string[];
  contextLines?: number;
  maxResponseLines?: number;
  /** The real end of a stream (readTail), used for the summary's tail when the inline copy was cut. */
  tails?: { stdout?: string; stderr?: string };
}

/** Terminal state → the governed-runtime contract's status. Anything that did not run to a clean exit 0 is a failure. */
export function statusOf(exit: Pick<JobExit, 'state' | 'exitCode' | 'timedOut'>): RuntimeStatus {
  switch (exit.state) {
    case 'exited':
      if (exit.timedOut) return 'timeout';
      return exit.exitCode === 0 ? 'success' : 'failure';
    case 'timed_out':
      return 'timeout';
    case 'cancelled':
      return 'cancelled';
    case 'signaled':
      return exit.timedOut ? 'timeout' : 'failure';
    case 'lost':
    case 'failed_to_start':
      return 'failure';
  }
}

export function shapeRuntimeResult(exit: JobExit, o: ShapeOptions): RuntimeExecuteStructured {
  const base: RuntimeExecuteStructured = {
    status: statusOf(exit),
    exitCode: exit.exitCode,
    signal: exit.signal,
    durationMs: Math.round(exit.durationMs),
    outputLines: exit.streams.stdout.lines + exit.streams.stderr.lines,
    outputBytes: exit.streams.stdout.bytes + exit.streams.stderr.bytes,
    artifactHandle: o.artifactHandle,
    ...(exit.phase ? { phase: exit.phase } : {}),
  };
  if (o.outputMode === 'minimal') return base;

  const maxLines = Math.max(2, Math.floor(o.maxResponseLines ?? DEFAULT_MAX_RESPONSE_LINES));
  const notes: string[] = [];
  const out: RuntimeExecuteStructured = { ...base };

  if (o.outputMode === 'summary') {
    const half = Math.floor(maxLines / 2);
    out.stdoutSummary = summarize(exit, 'stdout', half, maxLines - half, o.tails?.stdout, o.artifactHandle);
    out.stderrSummary = summarize(exit, 'stderr', 0, half, o.tails?.stderr, o.artifactHandle);
  }

  const terms = (o.queryTerms ?? []).filter((t) => t.length > 0);
  if (terms.length > 0) {
    const { excerpts, note } = inlineExcerpts(exit, terms, o.contextLines ?? DEFAULT_CONTEXT_LINES, maxLines, o.artifactHandle);
    out.excerpts = excerpts;
    if (note) notes.push(note);
  } else if (o.outputMode === 'intent') {
    out.excerpts = [];
  }
  if (notes.length) out.notes = notes;
  return out;
}

/** Lines of inline text: '\n' or '\r\n' separated; a final newline does not start another line. */
function splitLines(text: string): string[] {
  if (text.length === 0) return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.map((l) => capLine(l.endsWith('\r') ? l.slice(0, -1) : l));
}

/**
 * `headLines` from the start and `tailLines` from the end, with a marker for what lies between.
 * When the inline copy was cut and a real tail is given, the tail comes from it.
 */
function summarize(exit: JobExit, stream: StreamName, headLines: number, tailLines: number, realTail: string | undefined, handle: string | null): string {
  const inline = splitLines(stream === 'stdout' ? exit.stdout : exit.stderr);
  const cut = stream === 'stdout' ? exit.stdoutTruncated : exit.stderrTruncated;
  const total = exit.streams[stream].lines;
  const where = handle ? `; search them with query_output (artifactHandle "${handle}")` : '';
  if (!cut && inline.length <= headLines + tailLines) return inline.join('\n');
  if (!cut) {
    const omitted = inline.length - headLines - tailLines;
    return [...inline.slice(0, headLines), `... [${omitted} lines omitted${where}] ...`, ...inline.slice(inline.length - tailLines)].join('\n');
  }
  const head = inline.slice(0, headLines);
  if (realTail !== undefined) {
    const tailAll = splitLines(realTail);
    // A stream only a little over the inline cap (few, long lines): the tail must not repeat the head.
    const want = total > 0 ? Math.max(0, Math.min(tailLines, total - head.length)) : tailLines;
    const tail = want > 0 ? tailAll.slice(Math.max(0, tailAll.length - want)) : [];
    const omitted = total - head.length - tail.length;
    return (omitted > 0 ? [...head, `... [${omitted} lines omitted${where}] ...`, ...tail] : [...head, ...tail]).join('\n');
  }
  // Only the start of the stream is at hand: say so rather than pass its end off as the real tail.
  const shown = inline.slice(0, headLines + tailLines);
  return [...shown, `... [inline output truncated after ${inline.length} of ${total} lines${where}] ...`].join('\n');
}

/** Excerpts of the inline text (the start of each stream: its line numbers are the real ones), within the line budget. */
function inlineExcerpts(exit: JobExit, terms: string[], contextLines: number, maxLines: number, handle: string | null): { excerpts: Excerpt[]; note?: string } {
  const excerpts: Excerpt[] = [];
  let matches = 0;
  let budget = maxLines;
  let dropped = false;
  for (const stream of ['stdout', 'stderr'] as const) {
    const r = searchText(stream === 'stdout' ? exit.stdout : exit.stderr, {
      terms,
      contextLines,
      source: stream,
      maxExcerpts: INLINE_MAX_EXCERPTS - excerpts.length,
    });
    matches += r.matchCount;
    for (const e of r.excerpts) {
      if (budget <= 0) {
        dropped = true;
        break;
      }
      const lines = e.lineEnd - e.lineStart + 1;
      if (lines <= budget) {
        excerpts.push(e);
        budget -= lines;
        continue;
      }
      excerpts.push({ ...e, lineEnd: e.lineStart + budget - 1, content: e.content.split('\n').slice(0, budget).join('\n') });
      budget = 0;
      dropped = true;
    }
  }
  const cut = exit.stdoutTruncated || exit.stderrTruncated;
  // At the excerpt limit, later matches may exist that no excerpt shows.
  const more = dropped || excerpts.length >= INLINE_MAX_EXCERPTS;
  if (!more && !cut) return { excerpts };
  const parts = [`${matches} matching line${matches === 1 ? '' : 's'} in the inline output`];
  if (more) parts.push(`${excerpts.length} excerpt${excerpts.length === 1 ? '' : 's'} shown`);
  if (cut) parts.push('the inline output was truncated, so later lines were not searched');
  if (handle) parts.push(`query_output with artifactHandle "${handle}" searches the full output`);
  return { excerpts, note: parts.join('; ') };
}
