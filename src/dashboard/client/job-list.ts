/** The Jobs page: the team's live job list, or one job's page (job-page.ts) when the path names a job. */
import { api, isMissingRoute } from './api.ts';
import type { AdminJob, JobPage } from './answers.ts';
import { field, h, messages, poll, replaceKeepingFocus, table } from './dom.ts';
import { commandView, exitView, fmtDuration, fmtTime, jobBadge, jobOutcome, policyView, userText } from './format.ts';
import { renderJob } from './job-page.ts';

const STATES = ['queued', 'running', 'exited', 'signaled', 'timed_out', 'cancelled', 'lost', 'failed_to_start', 'refused'];

export function render(main: HTMLElement, params: string[], _me: unknown, preset: URLSearchParams): () => void {
  return params[0] ? renderJob(main, params[0]) : renderList(main, preset);
}

function renderList(main: HTMLElement, preset: URLSearchParams): () => void {
  const msg = messages();
  const state = h(
    'select',
    { name: 'state' },
    h('option', { value: '' }, 'any'),
    STATES.map((s) => h('option', { value: s }, s)),
  );
  const tool = h('input', { name: 'tool', type: 'text', placeholder: 'e.g. execute' });
  const subject = h('input', { name: 'subject', type: 'text', placeholder: 'token subject' });
  const body = h('div', { 'aria-live': 'polite' });
  const more = h('button', { type: 'button', hidden: true }, 'Older jobs');
  const first = h('button', { type: 'button', hidden: true }, 'Back to the newest');
  let cursor: string | null = null;
  let nextCursor: string | null = null;
  const opened = new Set<string>();
  // #/jobs?state=… (the overview links here): the filter starts set.
  if (preset && STATES.includes(preset.get('state') as string)) state.value = preset.get('state') as string;

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
      const r = await api<JobPage>('GET', '/jobs?' + query());
      msg.fail(null);
      nextCursor = r.next_cursor || null;
      more.hidden = !nextCursor;
      first.hidden = !cursor;
      replaceKeepingFocus(body, view(r.jobs || [], opened));
    } catch (e) {
      if (isMissingRoute(e)) {
        msg.say('This gateway does not list jobs yet (no GET /admin/v1/jobs).');
        return;
      }
      msg.fail(e);
    }
  };
  const form = h(
    'form',
    { class: 'filters', 'aria-label': 'Filter jobs' },
    field('State', state),
    field('Tool', tool),
    field('Subject', subject),
    h('button', { type: 'submit' }, 'Apply filters'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    cursor = null;
    load();
  });
  more.addEventListener('click', () => {
    cursor = nextCursor;
    load();
  });
  first.addEventListener('click', () => {
    cursor = null;
    load();
  });
  main.append(
    h('h1', null, 'Jobs'),
    h('p', { class: 'lead' }, "The team's jobs, newest first; the first page refreshes every 2 seconds."),
    form,
    msg.status,
    msg.error,
    body,
    h('div', { class: 'pager' }, first, more),
  );
  // Only the newest page is live; an older page stays put while it is read.
  return poll(() => (cursor ? Promise.resolve() : load()), 2000);
}

function view(jobs: AdminJob[], opened: Set<string>): HTMLElement {
  if (jobs.length === 0) return h('p', { class: 'empty' }, 'No jobs match.');
  return table(
    'Jobs',
    ['Job', 'State', 'Command', 'Policy', 'Tool', 'Subject', 'Agent', 'Created', 'Duration', 'Exit'],
    jobs.map((j) => {
      const id = j.job_id;
      const call = j.call || null;
      return h(
        'tr',
        { 'data-job': id, 'data-outcome': jobOutcome(j) },
        h(
          'th',
          { scope: 'row', class: 'nowrap' },
          h('a', { href: '#/jobs/' + encodeURIComponent(id), title: id, 'aria-label': 'Job ' + id }, h('code', null, String(id).slice(0, 8))),
        ),
        h('td', null, jobBadge(j)),
        h(
          'td',
          { class: 'command' },
          commandView(call?.command, 100, { key: id, open: opened }),
          call?.cwd ? h('div', { class: 'sub cwd' }, 'in ', userText(call.cwd)) : null,
        ),
        h('td', { class: 'policy' }, policyView(call, 60)),
        h('td', { class: 'nowrap' }, userText(j.tool)),
        h('td', { class: 'subject' }, userText(j.subject || '')),
        h('td', null, userText(j.agent_id || '')),
        h('td', null, fmtTime(j.created_at)),
        h('td', null, fmtDuration(j.duration_ms)),
        h('td', null, exitView(j)),
      );
    }),
  );
}
