/**
 * The MCP Apps view of a job's output (`ui://gatehouse/job-output.html`, src/mcp/apps/job-viewer.ts): the host renders
 * it in a sandboxed iframe next to an `execute` / `runtime_execute` result. It speaks the MCP Apps protocol (JSON-RPC
 * over postMessage: ui/initialize, then tools/call through the host), so it needs no network of its own — some hosts
 * ignore connect/frame domains anyway. It follows the job with `job_status` / `job_output` (live tail while it runs)
 * and searches with `query_output`.
 *
 * Hosts load a single document, so scripts/build-job-viewer.ts bundles this module into page.html's inline script.
 */
import type { z } from 'zod';
import type { JobOutputOutput, JobStatusOutput } from '../../../contracts/job-tools.ts';
import type { JobState } from '../../../contracts/job-view.ts';
import type { QueryOutputOutput } from '../../../contracts/tools.ts';

type JobStatus = z.infer<z.ZodObject<typeof JobStatusOutput>>;
type JobOutput = z.infer<z.ZodObject<typeof JobOutputOutput>>;
type QueryOutput = z.infer<z.ZodObject<typeof QueryOutputOutput>>;
type Stream = 'stdout' | 'stderr';

/** A tools/call result as the host passes it on (only the fields the view reads). */
interface ToolResult {
  isError?: boolean;
  content?: { text?: string }[];
  structuredContent?: Record<string, unknown>;
}

/** A JSON-RPC message from the host: an answer to one of our requests, a request or a notification. */
interface RpcMessage {
  jsonrpc?: string;
  id?: number | string;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: { code?: number; message: string };
}

const PROTOCOL_VERSION = '2026-01-26';
const TERMINAL: readonly JobState[] = ['exited', 'signaled', 'timed_out', 'cancelled', 'lost', 'failed_to_start', 'refused'];
const $ = <T extends HTMLElement = HTMLElement>(id: string): T => document.getElementById(id) as T;
const pending = new Map<number, { resolve: (result: unknown) => void; reject: (e: Error) => void }>();
let nextId = 1;
let job: string | null = null;
let handle: string | null = null;
let stopped = false;
const known = <T>(v: T | null | undefined): v is T => v !== null && v !== undefined;

// ---- the MCP Apps protocol over postMessage (the host is our parent window) ----
function send(msg: RpcMessage): void {
  window.parent.postMessage(msg, '*');
}
function request(method: string, params: unknown): Promise<unknown> {
  const id = nextId++;
  send({ jsonrpc: '2.0', id, method, params });
  return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
}
function notify(method: string, params: unknown): void {
  send({ jsonrpc: '2.0', method, params });
}
window.addEventListener('message', (ev: MessageEvent<RpcMessage | null>) => {
  if (ev.source !== window.parent) return;
  const m = ev.data;
  if (m?.jsonrpc !== '2.0') return;
  if (m.method === undefined && m.id !== undefined) {
    const p = pending.get(m.id as number);
    if (!p) return;
    pending.delete(m.id as number);
    if (m.error) p.reject(new Error(m.error.message));
    else p.resolve(m.result);
    return;
  }
  if (m.method === 'ui/notifications/tool-result') onResult(m.params as ToolResult | undefined);
  else if (m.method === 'ui/notifications/tool-cancelled') setState('cancelled', true);
  else if (m.method === 'ui/resource-teardown') {
    stopped = true;
    send({ jsonrpc: '2.0', id: m.id, result: {} });
  } else if (m.method === 'ping') send({ jsonrpc: '2.0', id: m.id, result: {} });
  else if (m.id !== undefined) send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found: ' + m.method } });
});

function firstText(r: ToolResult | undefined): string | undefined {
  return r?.content?.[0]?.text || undefined;
}

async function callTool<T>(name: string, args: Record<string, unknown>): Promise<T> {
  const r = (await request('tools/call', { name, arguments: args })) as ToolResult;
  if (r.isError) throw new Error(firstText(r) || name + ' failed');
  return (r.structuredContent || {}) as T;
}

// ---- the view ----
function setState(s: string, done?: boolean, good?: boolean): void {
  const el = $('state');
  el.textContent = s;
  el.className = 'state' + (done ? (good ? ' ok' : ' bad') : '');
}
function fail(e: unknown): void {
  $('error').textContent = e ? String((e as { message?: unknown }).message || e) : '';
}
function append(stream: Stream, text: string): void {
  if (!text) return;
  const pre = $(stream);
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.append(text);
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}

// ---- an interactive job's conversation: its writes (job_output's `inputs`) placed in stdout by byte offset ----
const stdoutBytes: Uint8Array[] = [];
type Input = NonNullable<JobOutput['inputs']>[number];
function keepStdout(text: string): void {
  if (text) stdoutBytes.push(new TextEncoder().encode(text));
}
function renderConversation(inputs: Input[]): void {
  if (inputs.length === 0) return;
  const all = new Uint8Array(stdoutBytes.reduce((n, b) => n + b.byteLength, 0));
  let at = 0;
  for (const b of stdoutBytes) {
    all.set(b, at);
    at += b.byteLength;
  }
  const text = (from: number, to: number) => new TextDecoder().decode(all.subarray(Math.min(from, all.byteLength), Math.min(to, all.byteLength)));
  const parts: (string | HTMLElement)[] = [];
  let from = 0;
  for (const i of inputs) {
    parts.push(text(from, i.stdout_at));
    from = i.stdout_at;
    const line = document.createElement('span');
    line.className = 'input';
    line.textContent = '› ' + (i.text ?? '(' + i.bytes + ' bytes)') + (i.eof ? ' [eof]' : '') + (i.text?.endsWith('\n') ? '' : '\n');
    parts.push(line);
  }
  parts.push(text(from, all.byteLength));
  $('conversation').replaceChildren(...parts);
  $('conversation-box').hidden = false;
}

function onResult(result: ToolResult | undefined): void {
  const sc = result?.structuredContent || {};
  job = ((sc.job_id || sc.jobId) as string | undefined) || null;
  handle = ((sc.artifact_handle || sc.artifactHandle) as string | undefined) || null;
  $('job').textContent = job || '(none)';
  if (result?.isError && !job) {
    setState('not run', true);
    fail(firstText(result) || 'the call failed');
    return;
  }
  if (!job) {
    setState('no job', true);
    return;
  }
  follow().catch(fail);
}

// ---- a large stored stream: its tail first, earlier pages on demand ----
/** How much of a stream's end is shown first, and how much each "earlier" click adds (one job_output page). */
const TAIL_BYTES = 64 * 1024;
/** Where the shown part of each stream begins (0: all of it from the start). */
const shownFrom: Record<Stream, number> = { stdout: 0, stderr: 0 };

function showEarlierButton(s: Stream): void {
  const b = $<HTMLButtonElement>(s + '-earlier');
  b.hidden = shownFrom[s] === 0;
  b.textContent = 'Load earlier ' + s + ' (' + Math.ceil(shownFrom[s] / 1024) + ' KiB not shown)';
}

/**
 * Where to start reading a stream: at the start, or — when the stored stream is already larger than
 * TAIL_BYTES — at its last TAIL_BYTES, so stderr and the end of a 3 MiB stdout show without reading it all.
 */
async function startOf(s: Stream): Promise<number> {
  const probe = await callTool<JobOutput>('job_output', { job_id: job, stream: s, offset: 0, max_bytes: 1 });
  const total = probe.total_bytes;
  if (!known(total) || total <= TAIL_BYTES) return 0;
  shownFrom[s] = total - TAIL_BYTES;
  showEarlierButton(s);
  return shownFrom[s];
}

/** Prepends the page before what is shown, keeping the reader's place. */
async function loadEarlier(s: Stream): Promise<void> {
  fail(null);
  const to = shownFrom[s];
  const from = Math.max(0, to - TAIL_BYTES);
  try {
    const o = await callTool<JobOutput>('job_output', { job_id: job, stream: s, offset: from, max_bytes: to - from });
    const pre = $(s);
    const below = pre.scrollHeight - pre.scrollTop;
    pre.prepend(o.data);
    pre.scrollTop = pre.scrollHeight - below;
    shownFrom[s] = from;
    showEarlierButton(s);
  } catch (e) {
    fail(e);
  }
}
for (const s of ['stdout', 'stderr'] as const) $(s + '-earlier').addEventListener('click', () => loadEarlier(s));

/** Reads both streams from byte offsets until the job has ended and both are at their end. */
async function follow(): Promise<void> {
  const offset: Record<Stream, number> = { stdout: 0, stderr: 0 };
  const eof: Record<Stream, boolean> = { stdout: false, stderr: false };
  const started: Record<Stream, boolean> = { stdout: false, stderr: false };
  for (;;) {
    if (stopped) return;
    const st = await callTool<JobStatus>('job_status', { job_id: job });
    const done = TERMINAL.includes(st.state);
    setState(st.state + (known(st.exit_code) ? ' (exit ' + st.exit_code + ')' : ''), done, st.state === 'exited' && st.exit_code === 0);
    $('meta').textContent = [st.tool, st.agent_id, known(st.duration_ms) ? st.duration_ms + ' ms' : ''].filter(Boolean).join(' · ');
    if (!handle && st.artifact_handle) handle = st.artifact_handle;
    for (const s of ['stdout', 'stderr'] as const) {
      if (eof[s]) continue;
      // Once the job has ended its streams are stored whole: decide then whether to start at the tail.
      if (!started[s] && done) {
        offset[s] = await startOf(s);
        started[s] = true;
      } else if (!started[s] && offset[s] > 0) started[s] = true;
      // Drain what is there now (several pages of a large stored output), then wait.
      for (let i = 0; i < 20; i++) {
        // wait_ms 0 answers at once, with an interactive job's writes (inputs) for its conversation.
        const o = await callTool<JobOutput>('job_output', { job_id: job, stream: s, offset: offset[s], ...(s === 'stdout' ? { wait_ms: 0 } : {}) });
        append(s, o.data);
        // An interactive job's conversation places writes by byte offset: only a stdout shown from its start.
        if (s === 'stdout' && shownFrom.stdout === 0) {
          keepStdout(o.data);
          renderConversation(o.inputs ?? []);
        }
        const moved = o.next_offset > offset[s];
        offset[s] = o.next_offset;
        if (o.eof) {
          eof[s] = true;
          break;
        }
        if (!moved) break;
      }
    }
    if (done && eof.stdout && eof.stderr) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function highlight(line: string, terms: string[]): DocumentFragment {
  const frag = document.createDocumentFragment();
  const l = line.toLowerCase();
  let i = 0;
  while (i < line.length) {
    let best = -1;
    let len = 0;
    for (const t of terms) {
      const p = l.indexOf(t, i);
      if (p !== -1 && (best === -1 || p < best)) {
        best = p;
        len = t.length;
      }
    }
    if (best === -1) break;
    frag.append(line.slice(i, best));
    const m = document.createElement('mark');
    m.textContent = line.slice(best, best + len);
    frag.append(m);
    i = best + len;
  }
  frag.append(line.slice(i));
  return frag;
}

// Hosts sandbox the frame without allow-forms (no form submission), so no <form>: a button and Enter.
$('go').addEventListener('click', () => search());
$('terms').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter') search();
});
async function search(): Promise<void> {
  fail(null);
  const terms = $<HTMLInputElement>('terms')
    .value.split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  if (!handle) {
    fail('no stored output to search yet');
    return;
  }
  if (terms.length === 0) {
    fail('enter at least one search term');
    return;
  }
  try {
    const r = await callTool<QueryOutput>('query_output', {
      artifactHandle: handle,
      queryTerms: terms,
      stream: $<HTMLSelectElement>('stream').value,
      contextLines: 2,
    });
    $('found').textContent = r.matchCount + ' matching line' + (r.matchCount === 1 ? '' : 's') + ' in ' + r.totalLines + ' lines';
    const lower = terms.map((t) => t.toLowerCase());
    $('results').replaceChildren(
      ...r.excerpts.map((x) => {
        const fig = document.createElement('figure');
        const cap = document.createElement('figcaption');
        cap.className = 'sub';
        cap.textContent = x.source + ' lines ' + x.lineStart + '–' + x.lineEnd;
        const pre = document.createElement('pre');
        x.content.split('\n').forEach((line, i) => {
          if (i) pre.append('\n');
          pre.append(highlight(line, lower));
        });
        fig.append(cap, pre);
        return fig;
      }),
    );
  } catch (e) {
    fail(e);
  }
}

// Tell the host how tall we are, so it can size the frame.
new ResizeObserver(() =>
  notify('ui/notifications/size-changed', { width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight }),
).observe(document.documentElement);

(async () => {
  try {
    await request('ui/initialize', { protocolVersion: PROTOCOL_VERSION, appInfo: { name: 'gatehouse-job-output', version: '1.0.0' }, appCapabilities: {} });
    notify('ui/notifications/initialized', {});
  } catch (e) {
    fail(e);
  }
})();
