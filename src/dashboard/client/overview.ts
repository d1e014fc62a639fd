/**
 * The Overview page, the dashboard's landing page: the team at a glance (agents and their slots, the last hour's
 * jobs by state, denials, pending approvals, recent failures), each linking to the page with the details.
 * Refreshed every 5 s from GET /admin/v1/overview.
 */
import { api, isMissingRoute } from './api.ts';
import type { Overview } from './answers.ts';
import { h, messages, poll, replaceKeepingFocus, table } from './dom.ts';
import { commandView, fmtAgo, fmtDuration, fmtTime, jobBadge, userText, visible } from './format.ts';

// Opened commands stay open across refreshes.
const opened = new Set<string>();
const STATE_ORDER = ['running', 'queued', 'exited', 'signaled', 'timed_out', 'cancelled', 'lost', 'failed_to_start', 'refused'];

export function render(main: HTMLElement): () => void {
  const msg = messages();
  const body = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' });
  main.append(
    h('h1', null, 'Overview'),
    h('p', { class: 'lead' }, 'The team at a glance: the last hour, refreshed every 5 seconds. Each number leads to its page.'),
    msg.status,
    msg.error,
    body,
  );
  return poll(async () => {
    try {
      const r = await api<Overview>('GET', '/overview');
      msg.fail(null);
      body.setAttribute('aria-busy', 'false');
      replaceKeepingFocus(body, view(r));
    } catch (e) {
      body.setAttribute('aria-busy', 'false');
      if (isMissingRoute(e)) {
        msg.say('This gateway has no overview (no GET /admin/v1/overview).');
        return;
      }
      msg.fail(e);
    }
  }, 5000);
}

/** One figure: a number, what it counts, and the page behind it. */
function tile(key: string, n: number | string, label: string, href: string, tone: string, detail?: string | null): HTMLElement {
  return h(
    'a',
    { class: 'tile ' + (tone || ''), href: href, 'data-tile': key },
    h('span', { class: 'n' }, String(n)),
    h('span', { class: 'label' }, label),
    detail ? h('span', { class: 'sub' }, detail) : null,
  );
}

function view(r: Overview): HTMLElement {
  const a = r.agents;
  const byState = r.jobs.byState || {};
  const failed = ['signaled', 'timed_out', 'lost', 'failed_to_start', 'refused'].reduce((n, s) => n + (byState[s] || 0), 0);
  const open = (byState.running || 0) + (byState.queued || 0);
  const failures = r.failures.jobs.length;
  const tiles = h(
    'div',
    { class: 'tiles' },
    tile(
      'agents',
      a.online,
      a.online === 1 ? 'agent online' : 'agents online',
      '#/agents',
      a.online === 0 ? 'bad' : 'ok',
      a.running + ' of ' + a.capacity + ' slots busy' + (a.total > a.online ? ' · ' + (a.total - a.online) + ' offline' : ''),
    ),
    tile('jobs', r.jobs.total, r.jobs.total === 1 ? 'job in the last hour' : 'jobs in the last hour', '#/jobs', '', open + ' running or queued'),
    tile(
      'denials',
      r.denials.count + (r.denials.atLeast ? '+' : ''),
      r.denials.count === 1 ? 'denial in the last hour' : 'denials in the last hour',
      '#/audit?decision=denied',
      r.denials.count ? 'warn' : '',
    ),
    tile(
      'approvals',
      r.approvals.pending + (r.approvals.atLeast ? '+' : ''),
      'pending approval' + (r.approvals.pending === 1 ? '' : 's'),
      '#/approvals',
      r.approvals.pending ? 'warn' : '',
    ),
    tile(
      'failures',
      failures,
      'failed job' + (failures === 1 ? '' : 's') + ' in 24 h' + (failures >= 8 ? ' (newest 8)' : ''),
      '#/jobs',
      failures ? 'bad' : 'ok',
      failed ? failed + ' in the last hour ended without an exit' : null,
    ),
  );
  const states = STATE_ORDER.filter((s) => byState[s]);
  const stateList =
    states.length === 0
      ? h('p', { class: 'empty' }, 'No jobs in the last hour.')
      : h(
          'ul',
          { class: 'states' },
          states.map((s) =>
            h(
              'li',
              null,
              h(
                'a',
                { href: '#/jobs?state=' + s, 'data-state-count': s },
                jobBadge({ state: s, exit_code: s === 'exited' ? 0 : undefined }),
                ' ',
                String(byState[s]),
              ),
            ),
          ),
        );
  return h(
    'div',
    null,
    tiles,
    health(r.dispatcher, a),
    storage(r.storage),
    h(
      'section',
      { 'aria-labelledby': 'ov-states' },
      h('h2', { id: 'ov-states' }, 'Jobs in the last hour by state'),
      stateList,
      h('p', { class: 'sub' }, 'exited counts every exit, with any code: the failures below name the non-zero ones.'),
    ),
    h('section', { 'aria-labelledby': 'ov-failures' }, h('h2', { id: 'ov-failures' }, 'Recent failures'), failuresView(r.failures.jobs)),
    h(
      'section',
      { 'aria-labelledby': 'ov-denials' },
      h('h2', { id: 'ov-denials' }, 'Recent denials'),
      denials(r.denials.recent),
      h('p', null, h('a', { href: '#/audit?decision=denied' }, 'All denials in the audit log')),
    ),
    h(
      'section',
      { 'aria-labelledby': 'ov-approvals' },
      h('h2', { id: 'ov-approvals' }, 'Waiting for approval'),
      approvals(r.approvals.recent),
      h('p', null, h('a', { href: '#/approvals' }, 'Decide on the Approvals page')),
    ),
  );
}

/** What the team's Durable Object counts right now (no D1 copy in between): the queue, its agents, the last job. */
function health(d: Overview['dispatcher'], a: Overview['agents']): HTMLElement | null {
  if (!d) return null;
  const last = d.lastJob
    ? 'the last job ended ' +
      fmtAgo(d.lastJob.endedAt, Date.now()) +
      ' after ' +
      fmtDuration(d.lastJob.durationMs) +
      ' (waited ' +
      fmtDuration(d.lastJob.queueWaitMs) +
      ' in the queue)'
    : 'no job has ended since the dispatcher last started';
  return h(
    'section',
    { 'aria-labelledby': 'ov-health', 'data-health': '' },
    h('h2', { id: 'ov-health' }, 'Dispatcher health, live'),
    h('p', null, d.queued + ' queued · ' + d.running + ' running · ' + a.online + ' agent' + (a.online === 1 ? '' : 's') + ' connected; ' + last + '.'),
  );
}

/** What the team keeps (its object's storage against the policy's retention) and what retention drops next. */
function storage(s: Overview['storage']): HTMLElement | null {
  if (!s) return null;
  const mb = (n: number) => (n / 1e6).toFixed(1) + ' MB';
  const next = s.nextDropAt === null ? 'nothing is due to be dropped' : 'the next audit rows are exported and dropped ' + fmtTime(s.nextDropAt);
  return h(
    'section',
    { 'aria-labelledby': 'ov-storage', 'data-storage': '' },
    h('h2', { id: 'ov-storage' }, 'Storage and retention'),
    h(
      'p',
      null,
      mb(s.bytes) +
        ' of ' +
        mb(s.maxBytes) +
        ' (policy retention.maxBytes) · audit kept ' +
        s.auditDays +
        ' days (retention.auditDays) · ' +
        next +
        ' · ' +
        s.exported.rows +
        ' rows exported so far (gatehouse audit export reads them).',
    ),
    s.lastError ? h('p', { class: 'error', role: 'alert' }, 'Retention cannot export: ' + visible(s.lastError)) : null,
  );
}

function failuresView(list: Overview['failures']['jobs']): HTMLElement {
  if (list.length === 0) return h('p', { class: 'empty' }, 'No failed jobs in the last 24 hours.');
  const now = Date.now();
  return table(
    'Failed jobs, newest first',
    ['Job', 'How it ended', 'Tool', 'Subject', 'When'],
    list.map((j) =>
      h(
        'tr',
        { 'data-failed-job': j.job_id },
        h(
          'th',
          { scope: 'row', class: 'nowrap' },
          h('a', { href: '#/jobs/' + encodeURIComponent(j.job_id), title: j.job_id, 'aria-label': 'Job ' + j.job_id }, h('code', null, j.job_id.slice(0, 8))),
        ),
        h(
          'td',
          null,
          jobBadge(j),
          j.state === 'signaled' && j.signal ? ' ' + j.signal : '',
          j.error ? h('div', { class: 'sub reason' }, userText(j.error)) : null,
        ),
        h('td', { class: 'nowrap' }, userText(j.tool)),
        h('td', { class: 'subject' }, userText(j.subject || '')),
        h('td', null, h('time', { datetime: new Date(j.created_at).toISOString(), title: fmtTime(j.created_at) }, fmtAgo(j.created_at, now))),
      ),
    ),
  );
}

function denials(list: Overview['denials']['recent']): HTMLElement {
  if (list.length === 0) return h('p', { class: 'empty' }, 'No denials in the last hour.');
  const now = Date.now();
  return table(
    'Newest denials',
    ['When', 'Tool', 'Subject', 'Command', 'Reason'],
    list.map((d) =>
      h(
        'tr',
        { 'data-denial': d.id },
        h('td', { class: 'nowrap' }, h('time', { datetime: new Date(d.at).toISOString(), title: fmtTime(d.at) }, fmtAgo(d.at, now))),
        h('td', { class: 'nowrap' }, userText(d.tool)),
        h('td', { class: 'subject' }, userText(d.subject)),
        h(
          'td',
          { class: 'command' },
          commandView(d.command, 80, { key: 'denial-' + d.id, open: opened }),
          d.cwd ? h('div', { class: 'sub cwd' }, 'in ', userText(d.cwd)) : null,
        ),
        h('td', { class: 'reason' }, reasonView(d.reason)),
      ),
    ),
  );
}

function reasonView(reason: string | null): HTMLElement | '' {
  if (!reason) return '';
  const text = visible(reason);
  return h('span', { title: text }, h('bdi', null, text.length > 160 ? text.slice(0, 160) + '…' : text));
}

function approvals(list: Overview['approvals']['recent']): HTMLElement {
  if (list.length === 0) return h('p', { class: 'empty' }, 'Nothing is waiting for approval.');
  return table(
    'Pending approvals',
    ['Approval', 'Asked by', 'Request', 'Expires'],
    list.map((a) =>
      h(
        'tr',
        { 'data-approval': a.id },
        h('th', { scope: 'row' }, h('a', { href: '#/approvals' }, h('code', null, a.id))),
        h('td', { class: 'subject' }, userText(a.subject)),
        h('td', { class: 'command' }, h('code', null, userText(a.summary))),
        h('td', null, fmtTime(Date.parse(a.expires_at))),
      ),
    ),
  );
}
