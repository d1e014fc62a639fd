/** One job's page: what ran and why, its state, its network, its output (job-output.ts), kill, and its MCP Apps view. */
import { ApiError, api, isMissingRoute } from './api.ts';
import type { AdminJob, JobCall, JobNetworkView } from './answers.ts';
import { openAppView } from './app-host.ts';
import { type Child, h, messages, poll, table } from './dom.ts';
import { commandView, exitView, fmtBytes, fmtDuration, fmtTime, jobBadge, policyView, userText } from './format.ts';
import { finalOutput, liveTail, type Live, searchForm, streamView } from './job-output.ts';
import { conversationView } from './conversation.ts';

const OPEN = ['queued', 'running'];

export function renderJob(main: HTMLElement, id: string): () => void {
  const msg = messages();
  const facts = h('dl', { class: 'facts' });
  const callFacts = h('dl', { class: 'facts call' });
  const network = h('section', { 'aria-labelledby': 'net-title', class: 'network', hidden: true });
  const kill = h('button', { type: 'button', class: 'danger', hidden: true }, 'Kill job');
  const appView = h('section', { 'aria-labelledby': 'app-title', class: 'appview' });
  const openApp = h('button', { type: 'button' }, 'Open the MCP Apps view');
  let lastJob: AdminJob | null = null;
  let closeApp: (() => void) | null = null;
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
  let handle: string | null = null;
  let state: string | null = null;
  const live: Live = { stdout: 0, stderr: 0 };
  /** An interactive job's writes placed in its stdout, as the live tail reads them. */
  const conversation = conversationView();
  let shownFinal = false;

  kill.addEventListener('click', async () => {
    if (!window.confirm('Kill job ' + id + '? Its whole process tree is stopped.')) return;
    kill.disabled = true;
    try {
      await api('POST', '/jobs/' + encodeURIComponent(id) + '/kill');
      msg.say('Kill requested.');
    } catch (e) {
      msg.fail(e);
    }
    kill.disabled = false;
  });

  main.append(
    h('p', null, h('a', { href: '#/jobs' }, '← All jobs')),
    h('h1', null, 'Job ', h('code', null, id)),
    msg.status,
    msg.error,
    callFacts,
    facts,
    network,
    h('div', { class: 'row' }, kill, openApp),
    appView,
    h(
      'section',
      { 'aria-labelledby': 'out-title' },
      h('h2', { id: 'out-title' }, 'Output'),
      outMsg.status,
      outMsg.error,
      conversation.el,
      outputs.stdout.el,
      outputs.stderr.el,
    ),
    search.el,
  );

  const refresh = async () => {
    let j: AdminJob;
    try {
      const r = await api<{ job?: AdminJob } & AdminJob>('GET', '/jobs/' + encodeURIComponent(id));
      j = r.job || r;
      msg.fail(null);
    } catch (e) {
      if (isMissingRoute(e)) {
        msg.say('This gateway does not show jobs yet (no GET /admin/v1/jobs/:id).');
        stop();
        return;
      }
      msg.fail(e);
      if (e instanceof ApiError && e.status === 404) stop();
      return;
    }
    state = j.state;
    lastJob = j;
    if (j.call && !callFacts.firstChild) callFacts.replaceChildren(...describeCall(j.call));
    handle = j.artifact_handle || null;
    facts.replaceChildren(...describeJob(j));
    if (j.network) {
      network.hidden = false;
      network.replaceChildren(...networkView(j.network));
    }
    kill.hidden = !OPEN.includes(state);
    if (OPEN.includes(state)) {
      await liveTail(id, outputs, live, outMsg, conversation);
    } else if (!shownFinal) {
      shownFinal = await finalOutput(handle, outputs, outMsg, j);
    }
  };
  const stop = poll(refresh, 1000);
  return () => {
    stop();
    if (closeApp) closeApp();
  };
}

/** What ran and why it was allowed: shown once (it never changes), so an opened command stays open. */
function describeCall(call: JobCall): HTMLElement[] {
  return factList([
    ['Command', commandView(call.command, 2000)],
    ['Working directory', call.cwd ? userText(call.cwd) : undefined],
    [
      'Policy',
      h(
        'span',
        null,
        policyView(call, 4000),
        call.policy?.approvalId ? h('span', null, ' · ', h('a', { href: '#/approvals' }, 'approval ' + call.policy.approvalId)) : null,
      ),
    ],
  ]);
}

function describeJob(j: AdminJob): HTMLElement[] {
  return factList([
    ['State', jobBadge(j)],
    ['Tool', userText(j.tool)],
    ['Subject', userText(j.subject)],
    ['Agent', userText(j.agent_id)],
    ['Sandbox', j.sandbox],
    ['Created', fmtTime(j.created_at)],
    ['Started', fmtTime(j.started_at)],
    ['Ended', fmtTime(j.ended_at)],
    // Two spans, named apart: the process's run time (the agent's clock), and started → result recorded here, which
    // also counts sandbox start-up and sending the output (seconds for MiBs).
    ['Process ran', fmtDuration(j.duration_ms)],
    [
      'Started → recorded',
      j.started_at !== null && j.ended_at !== null ? fmtDuration(j.ended_at - j.started_at) + ' (includes sending the output)' : undefined,
    ],
    ['Exit code', j.exit_code === null || j.exit_code === undefined ? undefined : exitView(j)],
    ['Signal', j.signal],
    ['Timed out', j.timed_out ? 'yes' : undefined],
    ['Error', j.error ? userText((j.error.message || '') + (j.error.code ? ' (' + j.error.code + ')' : '')) : undefined],
    ['Artifact', j.artifact_handle],
    ['Artifact state', j.artifact_state],
  ]);
}

/**
 * The job's network: its grant's mode and the policy key that set it, and each connection its
 * egress proxy reported — a refused one says why and which key to change.
 */
function networkView(n: JobNetworkView): HTMLElement[] {
  const head = h('h2', { id: 'net-title' }, 'Network');
  const grant = h(
    'p',
    null,
    'Mode ',
    h('code', null, n.mode || 'unknown'),
    n.source ? h('span', null, ' (set by ', h('code', null, userText(n.source)), ')') : null,
    ' · ' +
      n.allowed +
      ' allowed, ' +
      n.refused +
      ' refused' +
      (n.dropped ? ', ' + n.dropped + ' more not listed' : '') +
      ' · ' +
      fmtBytes(n.bytes_up) +
      ' up, ' +
      fmtBytes(n.bytes_down) +
      ' down',
  );
  if (!n.connections.length) return [head, grant, h('p', { class: 'sub' }, 'No connections.')];
  const rows = n.connections.map((c) =>
    h(
      'tr',
      { class: c.decision === 'refused' ? 'refused' : null },
      h('td', null, userText(c.host + ':' + c.port)),
      h('td', null, userText(c.method || '')),
      h('td', null, h('span', { class: 'badge ' + (c.decision === 'refused' ? 'denied' : 'allowed') }, c.decision)),
      h('td', null, userText(c.reason)),
      h('td', null, fmtBytes(c.bytes_up)),
      h('td', null, fmtBytes(c.bytes_down)),
      h('td', null, fmtTime(c.started_at)),
      h('td', null, fmtDuration(c.ms)),
    ),
  );
  return [head, grant, table('Connections of this job', ['Host', 'Method', 'Decision', 'Reason', 'Up', 'Down', 'Started', 'Time'], rows)];
}

function factList(rows: [string, Child | undefined][]): HTMLElement[] {
  const out: HTMLElement[] = [];
  for (const [k, v] of rows) {
    if (v === undefined || v === null || v === '') continue;
    out.push(h('dt', null, k), h('dd', null, typeof v === 'object' ? v : String(v)));
  }
  return out;
}
