/** Browser module `jobs.js`: the live job list and a job's page (output tail, search, download, kill). */
export const JOBS_JS = String.raw`
import { api, ApiError, commandView, field, fmtBytes, fmtDuration, fmtTime, h, isMissingRoute, jobBadge, jobOutcome, messages, pick, poll, replaceKeepingFocus, outputText, saveBlob, table, userText, visible } from './core.js';
import { openAppView } from './app-host.js';

const STATES = ['queued', 'running', 'exited', 'signaled', 'timed_out', 'cancelled', 'lost', 'failed_to_start', 'refused'];
const OPEN = ['queued', 'running'];
const TAIL_BYTES = 65536;

export function render(main, params, me, preset) {
  return params[0] ? renderJob(main, params[0]) : renderList(main, preset);
}

const jobId = (j) => pick(j, 'job_id', 'jobId', 'id');

function exitText(j) {
  const code = pick(j, 'exit_code', 'exitCode');
  const sig = pick(j, 'signal');
  if (code !== undefined) return String(code);
  return sig ? sig : '';
}

/** The exit cell: a failure reads as one (colour and the word), a clean exit stays plain. */
function exitView(j) {
  const t = exitText(j);
  if (!t) return j.timed_out ? h('span', { class: 'exit bad' }, 'timed out') : '';
  return jobOutcome(j) === 'bad' ? h('span', { class: 'exit bad', title: 'failed' }, t) : t;
}

/** Allowed by a rule, or approved by a person after an ask; the policy's reason shortened, whole on hover. */
function policyView(call, max) {
  if (!call) return h('span', { class: 'sub' }, '…');
  const p = call.policy || {};
  const reason = p.reason ? visible(p.reason) : '';
  const limit = max || 80;
  return h('span', { class: 'policy' },
    h('span', { class: 'badge ' + (p.decision || 'allowed') }, p.decision || 'allowed'),
    reason ? h('span', { class: 'sub reason', title: reason }, ' ', h('bdi', null, reason.length > limit ? reason.slice(0, limit) + '…' : reason)) : null);
}

function renderList(main, preset) {
  const msg = messages();
  const state = h('select', { name: 'state' }, h('option', { value: '' }, 'any'), STATES.map((s) => h('option', { value: s }, s)));
  const tool = h('input', { name: 'tool', type: 'text', placeholder: 'e.g. execute' });
  const subject = h('input', { name: 'subject', type: 'text', placeholder: 'token subject' });
  const body = h('div', { 'aria-live': 'polite' });
  const more = h('button', { type: 'button', hidden: true }, 'Older jobs');
  const first = h('button', { type: 'button', hidden: true }, 'Back to the newest');
  let cursor = null;
  let nextCursor = null;
  const opened = new Set();
  // #/jobs?state=… (the overview links here): the filter starts set.
  if (preset && STATES.includes(preset.get('state'))) state.value = preset.get('state');

  const query = () => {
    const q = new URLSearchParams({ limit: '50' });
    if (state.value) q.set('state', state.value);
    if (tool.value.trim()) q.set('tool', tool.value.trim());
    if (subject.value.trim()) q.set('subject', subject.value.trim());
    if (cursor) q.set('cursor', cursor);
    return q.toString();
  };
  const load = async () => {
    try {
      const r = await api('GET', '/jobs?' + query());
      msg.fail(null);
      nextCursor = pick(r, 'next_cursor', 'nextCursor') || null;
      more.hidden = !nextCursor;
      first.hidden = !cursor;
      replaceKeepingFocus(body, view(r.jobs || [], opened));
    } catch (e) {
      if (isMissingRoute(e)) { msg.say('This gateway does not list jobs yet (no GET /admin/v1/jobs).'); return; }
      msg.fail(e);
    }
  };
  const form = h('form', { class: 'filters', 'aria-label': 'Filter jobs' },
    field('State', state), field('Tool', tool), field('Subject', subject),
    h('button', { type: 'submit' }, 'Apply filters'));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); cursor = null; load(); });
  more.addEventListener('click', () => { cursor = nextCursor; load(); });
  first.addEventListener('click', () => { cursor = null; load(); });
  main.append(h('h1', null, 'Jobs'),
    h('p', { class: 'lead' }, 'The team\'s jobs, newest first; the first page refreshes every 2 seconds.'),
    form, msg.status, msg.error, body, h('div', { class: 'pager' }, first, more));
  // Only the newest page is live; an older page stays put while it is read.
  return poll(() => (cursor ? Promise.resolve() : load()), 2000);
}

function view(jobs, opened) {
  if (jobs.length === 0) return h('p', { class: 'empty' }, 'No jobs match.');
  return table('Jobs', ['Job', 'State', 'Command', 'Policy', 'Tool', 'Subject', 'Agent', 'Created', 'Duration', 'Exit'],
    jobs.map((j) => {
      const id = jobId(j);
      const call = j.call || null;
      return h('tr', { 'data-job': id, 'data-outcome': jobOutcome(j) },
        h('th', { scope: 'row', class: 'nowrap' }, h('a', { href: '#/jobs/' + encodeURIComponent(id), title: id, 'aria-label': 'Job ' + id }, h('code', null, String(id).slice(0, 8)))),
        h('td', null, jobBadge(j)),
        h('td', { class: 'command' }, commandView(call && call.command, 100, { key: id, open: opened }),
          call && call.cwd ? h('div', { class: 'sub cwd' }, 'in ', userText(call.cwd)) : null),
        h('td', { class: 'policy' }, policyView(call, 60)),
        h('td', { class: 'nowrap' }, userText(j.tool)),
        h('td', { class: 'subject' }, userText(j.subject || '')),
        h('td', null, userText(pick(j, 'agent_id', 'agent') || '')),
        h('td', null, fmtTime(pick(j, 'created_at', 'createdAt'))),
        h('td', null, fmtDuration(pick(j, 'duration_ms', 'durationMs'))),
        h('td', null, exitView(j)));
    }));
}

function renderJob(main, id) {
  const msg = messages();
  const facts = h('dl', { class: 'facts' });
  const callFacts = h('dl', { class: 'facts call' });
  const network = h('section', { 'aria-labelledby': 'net-title', class: 'network', hidden: true });
  const kill = h('button', { type: 'button', class: 'danger', hidden: true }, 'Kill job');
  const appView = h('section', { 'aria-labelledby': 'app-title', class: 'appview' });
  const openApp = h('button', { type: 'button' }, 'Open the MCP Apps view');
  let lastJob = null;
  let closeApp = null;
  openApp.addEventListener('click', () => {
    if (!lastJob) return;
    if (closeApp) closeApp();
    closeApp = openAppView(appView, lastJob);
    openApp.textContent = 'Reload the MCP Apps view';
    // Brought into sight: it may open below the fold, where a browser also throttles an off-screen frame.
    appView.scrollIntoView({ block: 'start' });
  });
  const outputs = { stdout: streamView('stdout'), stderr: streamView('stderr') };
  const outMsg = messages();
  const search = searchForm(() => handle);
  let handle = null;
  let state = null;
  let live = { stdout: 0, stderr: 0 };
  let shownFinal = false;

  kill.addEventListener('click', async () => {
    if (!window.confirm('Kill job ' + id + '? Its whole process tree is stopped.')) return;
    kill.disabled = true;
    try {
      await api('POST', '/jobs/' + encodeURIComponent(id) + '/kill');
      msg.say('Kill requested.');
    } catch (e) { msg.fail(e); }
    kill.disabled = false;
  });

  main.append(
    h('p', null, h('a', { href: '#/jobs' }, '← All jobs')),
    h('h1', null, 'Job ', h('code', null, id)),
    msg.status, msg.error, callFacts, facts, network, h('div', { class: 'row' }, kill, openApp), appView,
    h('section', { 'aria-labelledby': 'out-title' },
      h('h2', { id: 'out-title' }, 'Output'), outMsg.status, outMsg.error, outputs.stdout.el, outputs.stderr.el),
    search.el);

  const refresh = async () => {
    let j;
    try {
      const r = await api('GET', '/jobs/' + encodeURIComponent(id));
      j = r.job || r;
      msg.fail(null);
    } catch (e) {
      if (isMissingRoute(e)) { msg.say('This gateway does not show jobs yet (no GET /admin/v1/jobs/:id).'); stop(); return; }
      msg.fail(e);
      if (e instanceof ApiError && e.status === 404) stop();
      return;
    }
    state = j.state;
    lastJob = j;
    if (j.call && !callFacts.firstChild) callFacts.replaceChildren(...describeCall(j.call));
    handle = pick(j, 'artifact_handle', 'artifactHandle') || null;
    facts.replaceChildren(...describeJob(j));
    if (j.network) { network.hidden = false; network.replaceChildren(...networkView(j.network)); }
    kill.hidden = !OPEN.includes(state);
    if (OPEN.includes(state)) {
      await liveTail(id, outputs, live, outMsg);
    } else if (!shownFinal) {
      shownFinal = await finalOutput(handle, outputs, outMsg, j);
    }
  };
  const stop = poll(refresh, 1000);
  return () => { stop(); if (closeApp) closeApp(); };
}

/** What ran and why it was allowed: shown once (it never changes), so an opened command stays open. */
function describeCall(call) {
  return factList([
    ['Command', commandView(call.command, 2000)],
    ['Working directory', call.cwd ? userText(call.cwd) : undefined],
    ['Policy', h('span', null, policyView(call, 4000),
      call.policy && call.policy.approvalId ? h('span', null, ' · ', h('a', { href: '#/approvals' }, 'approval ' + call.policy.approvalId)) : null)],
  ]);
}

function describeJob(j) {
  return factList([
    ['State', jobBadge(j)],
    ['Tool', userText(j.tool)], ['Subject', userText(j.subject)], ['Agent', userText(pick(j, 'agent_id', 'agent'))], ['Sandbox', j.sandbox],
    ['Created', fmtTime(pick(j, 'created_at', 'createdAt'))], ['Started', fmtTime(pick(j, 'started_at', 'startedAt'))],
    ['Ended', fmtTime(pick(j, 'ended_at', 'endedAt'))], ['Duration', fmtDuration(pick(j, 'duration_ms', 'durationMs'))],
    ['Exit code', pick(j, 'exit_code', 'exitCode') === undefined ? undefined : exitView(j)], ['Signal', j.signal], ['Timed out', j.timed_out ? 'yes' : undefined],
    ['Error', j.error ? userText((j.error.message || '') + (j.error.code ? ' (' + j.error.code + ')' : '')) : undefined],
    ['Artifact', pick(j, 'artifact_handle', 'artifactHandle')], ['Artifact state', j.artifact_state],
  ]);
}

/**
 * The job's network: its grant's mode and the policy key that set it, and each connection its
 * egress proxy reported — a refused one says why and which key to change.
 */
function networkView(n) {
  const head = h('h2', { id: 'net-title' }, 'Network');
  const grant = h('p', null, 'Mode ', h('code', null, n.mode || 'unknown'), n.source ? h('span', null, ' (set by ', h('code', null, userText(n.source)), ')') : null,
    ' · ' + n.allowed + ' allowed, ' + n.refused + ' refused' + (n.dropped ? ', ' + n.dropped + ' more not listed' : '') +
    ' · ' + fmtBytes(n.bytes_up) + ' up, ' + fmtBytes(n.bytes_down) + ' down');
  if (!n.connections.length) return [head, grant, h('p', { class: 'sub' }, 'No connections.')];
  const rows = n.connections.map((c) => h('tr', { class: c.decision === 'refused' ? 'refused' : null },
    h('td', null, userText(c.host + ':' + c.port)), h('td', null, userText(c.method || '')),
    h('td', null, h('span', { class: 'badge ' + (c.decision === 'refused' ? 'denied' : 'allowed') }, c.decision)),
    h('td', null, userText(c.reason)), h('td', null, fmtBytes(c.bytes_up)), h('td', null, fmtBytes(c.bytes_down)),
    h('td', null, fmtTime(c.started_at)), h('td', null, fmtDuration(c.ms))));
  return [head, grant, table('Connections of this job', ['Host', 'Method', 'Decision', 'Reason', 'Up', 'Down', 'Started', 'Time'], rows)];
}

function factList(rows) {
  const out = [];
  for (const [k, v] of rows) {
    if (v === undefined || v === null || v === '') continue;
    out.push(h('dt', null, k), h('dd', null, typeof v === 'object' ? v : String(v)));
  }
  return out;
}

function streamView(stream) {
  const pre = h('pre', { class: 'output', tabindex: '0', 'aria-label': stream, 'data-stream': stream });
  const info = h('p', { class: 'sub' });
  const dl = h('button', { type: 'button', hidden: true }, 'Download ' + stream);
  const el = h('section', { class: 'stream', 'aria-label': stream }, h('h3', null, stream), info, pre, dl);
  return { el: el, pre: pre, info: info, dl: dl, stream: stream };
}

/** While the job runs: new bytes since the last poll, if the gateway offers live output. */
async function liveTail(id, outputs, live, outMsg) {
  for (const s of ['stdout', 'stderr']) {
    try {
      const r = await api('GET', '/jobs/' + encodeURIComponent(id) + '/output?stream=' + s + '&offset=' + live[s]);
      if (r.text) {
        outputs[s].pre.append(outputText(r.text));
        outputs[s].pre.scrollTop = outputs[s].pre.scrollHeight;
      }
      live[s] = r.nextOffset;
      outputs[s].info.textContent = 'live · ' + fmtBytes(live[s]);
    } catch (e) {
      if (isMissingRoute(e)) { outMsg.say('Running… the output appears here when the job ends (this gateway has no live output).'); return; }
      outMsg.fail(e);
      return;
    }
  }
}

/** After the job: the tail of each stored stream, and downloads. Returns true once shown. */
async function finalOutput(handle, outputs, outMsg, job) {
  if (!handle) { outMsg.say('This job stored no output.'); return true; }
  // The upload can trail the exit: wait until the gateway says the artifact is complete (or failed).
  if (job.artifact_state === 'uploading') { outMsg.say('Storing the output…'); return false; }
  if (job.artifact_state === 'none' || job.artifact_state === 'failed') { outMsg.say('No stored output (artifact ' + job.artifact_state + ').'); return true; }
  let info;
  try {
    info = await api('GET', '/artifacts/' + encodeURIComponent(handle));
  } catch (e) {
    // The upload can trail the exit by a moment; keep polling unless the artifact is gone for good.
    if (e instanceof ApiError && e.status === 404) {
      const st = job.artifact_state;
      // partial with nothing stored: the upload failed or the agent was lost; what the gateway kept is in job_output.
      if (st === 'failed' || st === 'none' || st === 'partial') { outMsg.say('No stored output (artifact ' + st + ').'); return true; }
      outMsg.say('Waiting for the output to be stored…');
      return false;
    }
    outMsg.fail(e);
    return false;
  }
  outMsg.clear();
  for (const s of ['stdout', 'stderr']) {
    const v = outputs[s];
    const meta = info.streams.find((x) => x.stream === s);
    if (!meta) { v.info.textContent = 'empty'; v.pre.replaceChildren(); v.dl.hidden = true; continue; }
    try {
      const r = await api('GET', '/artifacts/' + encodeURIComponent(handle) + '/' + s + '?tail=' + TAIL_BYTES);
      v.pre.replaceChildren(outputText(r.text));
      v.info.textContent = fmtBytes(meta.bytes) + ', ' + meta.lines + ' lines' + (meta.truncated ? ', truncated at the artifact cap' : '') +
        (r.offset > 0 ? ' · showing the last ' + fmtBytes(r.length) : '');
      v.pre.scrollTop = v.pre.scrollHeight;
      v.dl.hidden = false;
      v.dl.onclick = async () => {
        try {
          const resp = await api('GET', '/artifacts/' + encodeURIComponent(handle) + '/' + s + '/download', undefined, { raw: true });
          saveBlob(await resp.blob(), info.jobId + '-' + s + '.txt');
        } catch (e) { outMsg.fail(e); }
      };
    } catch (e) { outMsg.fail(e); }
  }
  return true;
}

function searchForm(getHandle) {
  const terms = h('input', { type: 'search', name: 'terms', required: true, placeholder: 'error, warning' });
  const stream = h('select', { name: 'stream' }, ['both', 'stdout', 'stderr'].map((s) => h('option', { value: s }, s)));
  const ctx = h('input', { type: 'number', name: 'contextLines', min: '0', max: '10', value: '3' });
  const msg = messages();
  const results = h('div', { class: 'results', 'aria-live': 'polite' });
  const form = h('form', { class: 'filters', 'aria-label': 'Search the output' },
    field('Search terms', terms, 'comma-separated; case-insensitive; a line matching any term is shown'),
    field('Stream', stream), field('Context lines', ctx), h('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.clear();
    const handle = getHandle();
    if (!handle) { msg.fail(new Error('this job has no stored output to search yet')); return; }
    const list = terms.value.split(',').map((t) => t.trim()).filter(Boolean);
    if (list.length === 0) { msg.fail(new Error('enter at least one search term')); terms.focus(); return; }
    const q = new URLSearchParams();
    for (const t of list) q.append('q', t);
    q.set('stream', stream.value);
    q.set('contextLines', ctx.value || '0');
    msg.say('Searching…');
    try {
      const r = await api('GET', '/artifacts/' + encodeURIComponent(handle) + '/search?' + q.toString());
      msg.say(r.matchCount + ' matching line' + (r.matchCount === 1 ? '' : 's') + ' in ' + r.totalLines + ' lines (' + r.searchedStreams.join(' + ') + ')');
      results.replaceChildren(...r.excerpts.map((x) => excerpt(x, list)));
    } catch (e) { msg.say(''); msg.fail(e); }
  });
  const el = h('section', { 'aria-labelledby': 'search-title' }, h('h2', { id: 'search-title' }, 'Search the output'), form, msg.status, msg.error, results);
  return { el: el };
}

function excerpt(x, terms) {
  const lines = x.content.split('\n');
  const lower = terms.map((t) => t.toLowerCase());
  return h('figure', { class: 'excerpt' },
    h('figcaption', null, x.source + ' lines ' + x.lineStart + '–' + x.lineEnd),
    h('pre', { class: 'output' }, lines.map((l, i) => h('span', { class: 'line' },
      h('span', { class: 'ln', 'aria-hidden': 'true' }, String(x.lineStart + i).padStart(5, ' ') + '  '), mark(outputText(l), lower), '\n'))));
}

/** Wraps the matched terms of a line in <mark>, as text nodes only. */
function mark(line, lower) {
  const l = line.toLowerCase();
  const out = [];
  let i = 0;
  while (i < line.length) {
    let best = -1;
    let len = 0;
    for (const t of lower) {
      const p = l.indexOf(t, i);
      if (p !== -1 && (best === -1 || p < best)) { best = p; len = t.length; }
    }
    if (best === -1) break;
    if (best > i) out.push(line.slice(i, best));
    out.push(h('mark', null, line.slice(best, best + len)));
    i = best + len;
  }
  if (i < line.length) out.push(line.slice(i));
  return out;
}
`;
