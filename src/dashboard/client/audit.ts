/** The Audit page: the team's audit log with filters, paging and each decision's reason; the jobs' network connections. */
import { AUDIT_TOOLS } from '../../contracts/audit.ts';
import { api } from './api.ts';
import type { AuditEntry, AuditPage, CommandValue, EgressList } from './answers.ts';
import { type Child, field, h, messages, table } from './dom.ts';
import { fmtDuration, fmtTime, userText } from './format.ts';

export function render(main: HTMLElement, _params: string[], _me: unknown, preset: URLSearchParams): null {
  const msg = messages();
  const decision = h(
    'select',
    { name: 'decision' },
    h('option', { value: '' }, 'any'),
    ['allowed', 'denied', 'failed', 'asked'].map((d) => h('option', { value: d, selected: !!preset && preset.get('decision') === d }, d)),
  );
  const toolList = h(
    'datalist',
    { id: 'audit-tools' },
    AUDIT_TOOLS.map((t) => h('option', { value: t })),
  );
  const tool = h('input', { name: 'tool', type: 'text', list: 'audit-tools', placeholder: 'any' });
  const subject = h('input', { name: 'subject', type: 'text', placeholder: 'any' });
  const since = h('input', { name: 'since', type: 'datetime-local' });
  const until = h('input', { name: 'until', type: 'datetime-local' });
  const limit = h(
    'select',
    { name: 'limit' },
    ['25', '50', '100', '200'].map((n) => h('option', { value: n, selected: n === '50' }, n)),
  );
  const body = h('div');
  const older = h('button', { type: 'button', hidden: true }, 'Older entries');
  const newest = h('button', { type: 'button', hidden: true }, 'Back to the newest');
  const pageInfo = h('span', { class: 'sub' });
  // The cursors of the pages before this one, so "newest" and paging stay consistent.
  let cursors: (string | null)[] = [];
  let next: string | null = null;

  const query = () => {
    const q = new URLSearchParams({ limit: limit.value });
    if (decision.value) q.set('decision', decision.value);
    if (tool.value.trim()) q.set('tool', tool.value.trim());
    if (subject.value.trim()) q.set('subject', subject.value.trim());
    // datetime-local is the viewer's local time; the API takes ISO 8601 (UTC) or epoch ms.
    if (since.value) q.set('since', new Date(since.value).toISOString());
    if (until.value) q.set('until', new Date(until.value).toISOString());
    const c = cursors[cursors.length - 1];
    if (c) q.set('cursor', c);
    return q.toString();
  };
  const load = async () => {
    msg.clear();
    msg.say('Loading…');
    try {
      const r = await api<AuditPage>('GET', '/audit?' + query());
      next = r.nextCursor;
      older.hidden = !next;
      newest.hidden = cursors.length === 0;
      pageInfo.textContent = 'page ' + (cursors.length + 1);
      body.replaceChildren(view(r.entries));
      msg.say(r.entries.length + ' entr' + (r.entries.length === 1 ? 'y' : 'ies') + ' on page ' + (cursors.length + 1));
    } catch (e) {
      msg.say('');
      msg.fail(e);
    }
  };
  const form = h(
    'form',
    { class: 'filters', 'aria-label': 'Filter the audit log' },
    field('Decision', decision),
    field('Tool', tool),
    toolList,
    field('Subject', subject),
    field('Since', since),
    field('Until', until),
    field('Per page', limit),
    h('button', { type: 'submit' }, 'Apply filters'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    cursors = [];
    load();
  });
  older.addEventListener('click', () => {
    cursors.push(next);
    load();
  });
  newest.addEventListener('click', () => {
    cursors = [];
    load();
  });
  const refresh = h('button', { type: 'button' }, 'Refresh');
  refresh.addEventListener('click', load);
  main.append(
    h('h1', null, 'Audit log'),
    h('p', { class: 'lead' }, "Every call and its decision, newest first. Denials carry the policy's reason."),
    form,
    msg.status,
    msg.error,
    body,
    h('div', { class: 'pager' }, newest, older, refresh, pageInfo),
    egressSection(),
  );
  load();
  return null;
}

/** The team's latest network connections (one row per connection a job's egress proxy made or refused). */
function egressSection(): HTMLElement {
  const msg = messages();
  const refusedOnly = h('input', { type: 'checkbox', name: 'refused' });
  const body = h('div');
  const load = async () => {
    try {
      const r = await api<EgressList>('GET', '/audit/egress?limit=50' + (refusedOnly.checked ? '&refused=1' : ''));
      msg.fail(null);
      body.replaceChildren(
        r.connections.length === 0
          ? h('p', { class: 'empty' }, 'No network connections.')
          : table(
              'Network connections',
              ['Started', 'Job', 'Host', 'Method', 'Credential', 'Decision', 'Reason', 'Up / down'],
              r.connections.map((c) =>
                h(
                  'tr',
                  { 'data-egress-decision': c.decision },
                  h('td', null, fmtTime(c.started_at)),
                  h('td', null, h('a', { href: '#/jobs/' + encodeURIComponent(c.job_id) }, c.job_id)),
                  h('td', null, userText(c.host + ':' + c.port)),
                  h('td', null, userText(c.method || '')),
                  // The team secret the proxy added to this connection's requests (its name, never its value).
                  h('td', { 'data-credential': c.credential ?? '' }, userText(c.credential ?? '')),
                  h('td', null, h('span', { class: 'badge ' + (c.decision === 'refused' ? 'denied' : 'allowed') }, c.decision)),
                  h('td', { class: 'reason' }, userText(c.reason)),
                  h('td', null, c.bytes_up + ' / ' + c.bytes_down + ' B'),
                ),
              ),
            ),
      );
    } catch (e) {
      msg.fail(e);
    }
  };
  refusedOnly.addEventListener('change', load);
  load();
  return h(
    'section',
    { 'aria-labelledby': 'egress-title' },
    h('h2', { id: 'egress-title' }, 'Network connections'),
    h('p', { class: 'lead' }, 'What jobs connected to through the egress proxy, newest first; a refused one names the policy key to change.'),
    field('Refused only', refusedOnly),
    msg.status,
    msg.error,
    body,
  );
}

/**
 * A stored command as tokens: each argv element its own isolated element (quoted when it is not a
 * plain word, controls visible), so where one argument ends and what it holds can always be read.
 * A shell string is one token; another tool's request is its JSON (controls visible).
 */
function command(c: CommandValue): HTMLElement | '' {
  if (c === null || c === undefined) return '';
  const token = (x: unknown) => userText(typeof x === 'string' ? x : JSON.stringify(x), true, 'arg');
  let tokens: Child[];
  if (Array.isArray(c)) tokens = c.map(token);
  else if (typeof c === 'object' && typeof c.command === 'string') {
    tokens = [token(c.command)].concat(Array.isArray(c.args) ? c.args.map(token) : []);
    if (c.runtime) tokens.unshift(userText('[' + c.runtime + ']', false, 'runtime'));
  } else if (typeof c === 'object' && c.artifactHandle) tokens = [token(c.artifactHandle)];
  else tokens = [userText(c, false, 'json')];
  const out: Child[] = [];
  tokens.forEach((t, i) => {
    if (i) out.push(' ');
    out.push(t);
  });
  return h('code', { class: 'argv' }, out);
}

function view(entries: AuditEntry[]): HTMLElement {
  if (entries.length === 0) return h('p', { class: 'empty' }, 'No audit entries match.');
  return table(
    'Audit entries',
    ['Time', 'Decision', 'Tool', 'Subject', 'Command', 'Reason', 'Job', 'Result'],
    entries.map((e) =>
      h(
        'tr',
        { 'data-decision': e.decision, 'data-audit-id': e.id },
        h('td', null, h('time', { datetime: new Date(e.at).toISOString() }, fmtTime(e.at))),
        h('td', null, h('span', { class: 'badge ' + e.decision }, e.decision)),
        h('td', { class: 'nowrap' }, userText(e.tool)),
        h('td', { class: 'subject' }, userText(e.subject)),
        h('td', { class: 'command' }, command(e.command), e.cwd ? h('div', { class: 'sub cwd' }, 'cwd ', userText(e.cwd)) : null),
        h('td', { class: 'reason' }, userText(e.reason || '')),
        h('td', null, e.jobId ? h('a', { href: '#/jobs/' + encodeURIComponent(e.jobId) }, e.jobId) : ''),
        h('td', null, [e.exitStatus, fmtDuration(e.durationMs)].filter(Boolean).join(' · ')),
      ),
    ),
  );
}
