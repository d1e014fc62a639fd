/**
 * The MCP Apps view of a job's output (`ui://gatehouse/job-output.html`): the host renders it in a
 * sandboxed iframe next to an `execute` / `runtime_execute` result. It speaks the MCP Apps
 * protocol (JSON-RPC over postMessage: ui/initialize, then tools/call through the host), so it
 * needs no network of its own — some hosts ignore connect/frame domains anyway. It follows the job
 * with `job_status` / `job_output` (live tail while it runs) and searches with `query_output`.
 * Self-contained: hosts load a single document, so script and style are inline here. Written in
 * plain JavaScript without backticks or dollar-brace so it fits a String.raw template.
 */
export const JOB_VIEWER_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Job output · Gatehouse</title>
<style>
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bad: #a40e26; --ok: #116329; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #8d96a0; --line: #30363d; --bad: #ff7b72; --ok: #3fb950; } }
body { margin: 0; padding: .5rem .75rem; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: transparent; }
header { display: flex; flex-wrap: wrap; gap: .25rem 1rem; align-items: baseline; }
h1 { font-size: 1rem; margin: 0; }
.sub { color: var(--muted); font-size: .85rem; }
.state { font-weight: 700; }
.state.bad { color: var(--bad); } .state.ok { color: var(--ok); }
pre { font: 12px/1.4 ui-monospace, Menlo, Consolas, monospace; background: #0d1117; color: #e6edf3; padding: .5rem; border-radius: 6px;
  max-height: 18rem; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; margin: .25rem 0; }
h2 { font-size: .9rem; margin: .5rem 0 0; }
.search { display: flex; flex-wrap: wrap; gap: .5rem; align-items: flex-end; margin: .5rem 0; }
label { display: flex; flex-direction: column; font-size: .8rem; font-weight: 600; }
input, select, button { font: inherit; padding: .25rem .5rem; }
mark { background: #f2cc60; color: #0d1117; }
.error { color: var(--bad); font-weight: 600; }
</style>
</head>
<body>
<header><h1>Job <code id="job">…</code></h1><span id="state" class="state" role="status">waiting for the result</span><span id="meta" class="sub"></span></header>
<p id="error" class="error" role="alert"></p>
<h2>stdout</h2><pre id="stdout" tabindex="0" aria-label="stdout"></pre>
<h2>stderr</h2><pre id="stderr" tabindex="0" aria-label="stderr"></pre>
<div class="search" role="search" aria-label="Search the output">
<label>Search terms<input id="terms" type="search" placeholder="error, warning"></label>
<label>Stream<select id="stream"><option>both</option><option>stdout</option><option>stderr</option></select></label>
<button id="go" type="button">Search</button>
</div>
<p id="found" class="sub" role="status"></p>
<div id="results"></div>
<script type="module">
const PROTOCOL_VERSION = '2026-01-26';
const TERMINAL = ['exited', 'signaled', 'timed_out', 'cancelled', 'lost', 'failed_to_start', 'refused'];
const $ = (id) => document.getElementById(id);
const pending = new Map();
let nextId = 1;
let job = null;
let handle = null;
let stopped = false;

// ---- the MCP Apps protocol over postMessage (the host is our parent window) ----
function send(msg) { window.parent.postMessage(msg, '*'); }
function request(method, params) {
  const id = nextId++;
  send({ jsonrpc: '2.0', id: id, method: method, params: params });
  return new Promise((resolve, reject) => pending.set(id, { resolve: resolve, reject: reject }));
}
function notify(method, params) { send({ jsonrpc: '2.0', method: method, params: params }); }
window.addEventListener('message', (ev) => {
  if (ev.source !== window.parent) return;
  const m = ev.data;
  if (!m || m.jsonrpc !== '2.0') return;
  if (m.method === undefined && m.id !== undefined) {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.error) p.reject(new Error(m.error.message)); else p.resolve(m.result);
    return;
  }
  if (m.method === 'ui/notifications/tool-result') onResult(m.params);
  else if (m.method === 'ui/notifications/tool-cancelled') setState('cancelled', true);
  else if (m.method === 'ui/resource-teardown') { stopped = true; send({ jsonrpc: '2.0', id: m.id, result: {} }); }
  else if (m.method === 'ping') send({ jsonrpc: '2.0', id: m.id, result: {} });
  else if (m.id !== undefined) send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found: ' + m.method } });
});

async function callTool(name, args) {
  const r = await request('tools/call', { name: name, arguments: args });
  if (r.isError) throw new Error((r.content && r.content[0] && r.content[0].text) || (name + ' failed'));
  return r.structuredContent || {};
}

// ---- the view ----
function setState(s, done, good) {
  const el = $('state');
  el.textContent = s;
  el.className = 'state' + (done ? (good ? ' ok' : ' bad') : '');
}
function fail(e) { $('error').textContent = e ? String(e.message || e) : ''; }
function append(stream, text) {
  if (!text) return;
  const pre = $(stream);
  const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.append(text);
  if (atEnd) pre.scrollTop = pre.scrollHeight;
}

function onResult(result) {
  const sc = (result && result.structuredContent) || {};
  job = sc.job_id || sc.jobId || null;
  handle = sc.artifact_handle || sc.artifactHandle || null;
  $('job').textContent = job || '(none)';
  if (result && result.isError && !job) {
    setState('not run', true);
    fail((result.content && result.content[0] && result.content[0].text) || 'the call failed');
    return;
  }
  if (!job) { setState('no job', true); return; }
  follow().catch(fail);
}

/** Reads both streams from byte offsets until the job has ended and both are at their end. */
async function follow() {
  const offset = { stdout: 0, stderr: 0 };
  const eof = { stdout: false, stderr: false };
  for (;;) {
    if (stopped) return;
    const st = await callTool('job_status', { job_id: job });
    const done = TERMINAL.includes(st.state);
    setState(st.state + (st.exit_code !== null && st.exit_code !== undefined ? ' (exit ' + st.exit_code + ')' : ''), done, st.state === 'exited' && st.exit_code === 0);
    $('meta').textContent = [st.tool, st.agent_id, st.duration_ms !== null && st.duration_ms !== undefined ? st.duration_ms + ' ms' : ''].filter(Boolean).join(' · ');
    if (!handle && st.artifact_handle) handle = st.artifact_handle;
    for (const s of ['stdout', 'stderr']) {
      if (eof[s]) continue;
      // Drain what is there now (several pages of a large stored output), then wait.
      for (let i = 0; i < 20; i++) {
        const o = await callTool('job_output', { job_id: job, stream: s, offset: offset[s] });
        append(s, o.data);
        const moved = o.next_offset > offset[s];
        offset[s] = o.next_offset;
        if (o.eof) { eof[s] = true; break; }
        if (!moved) break;
      }
    }
    if (done && eof.stdout && eof.stderr) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function highlight(line, terms) {
  const frag = document.createDocumentFragment();
  const l = line.toLowerCase();
  let i = 0;
  while (i < line.length) {
    let best = -1, len = 0;
    for (const t of terms) { const p = l.indexOf(t, i); if (p !== -1 && (best === -1 || p < best)) { best = p; len = t.length; } }
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
$('terms').addEventListener('keydown', (ev) => { if (ev.key === 'Enter') search(); });
async function search() {
  fail(null);
  const terms = $('terms').value.split(',').map((t) => t.trim()).filter(Boolean);
  if (!handle) { fail('no stored output to search yet'); return; }
  if (terms.length === 0) { fail('enter at least one search term'); return; }
  try {
    const r = await callTool('query_output', { artifactHandle: handle, queryTerms: terms, stream: $('stream').value, contextLines: 2 });
    $('found').textContent = r.matchCount + ' matching line' + (r.matchCount === 1 ? '' : 's') + ' in ' + r.totalLines + ' lines';
    const lower = terms.map((t) => t.toLowerCase());
    $('results').replaceChildren(...r.excerpts.map((x) => {
      const fig = document.createElement('figure');
      const cap = document.createElement('figcaption');
      cap.className = 'sub';
      cap.textContent = x.source + ' lines ' + x.lineStart + '–' + x.lineEnd;
      const pre = document.createElement('pre');
      x.content.split('\n').forEach((line, i) => { if (i) pre.append('\n'); pre.append(highlight(line, lower)); });
      fig.append(cap, pre);
      return fig;
    }));
  } catch (e) { fail(e); }
}

// Tell the host how tall we are, so it can size the frame.
new ResizeObserver(() => notify('ui/notifications/size-changed', { width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight }))
  .observe(document.documentElement);

(async () => {
  try {
    await request('ui/initialize', { protocolVersion: PROTOCOL_VERSION, appInfo: { name: 'gatehouse-job-output', version: '1.0.0' }, appCapabilities: {} });
    notify('ui/notifications/initialized', {});
  } catch (e) { fail(e); }
})();
</script>
</body>
</html>
`;
