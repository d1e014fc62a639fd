/**
 * The Approvals page: runs the team policy asks a person about (rule decision `ask`). Pending ones first, each with
 * Approve / Deny; refreshed every 3 s. Deciding here is the same admin API call as `gatehouse approvals approve|deny`
 * (audited with the signed-in admin).
 */
import { api, isMissingRoute } from './api.ts';
import type { ApprovalList, ApprovalView } from './answers.ts';
import { h, messages, poll, replaceKeepingFocus, table } from './dom.ts';
import { fmtTime, userText, visible } from './format.ts';

type Decide = (id: string, verb: 'approve' | 'deny') => Promise<void>;

export function render(main: HTMLElement): () => void {
  const msg = messages();
  const pending = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' });
  const recent = h('div');
  main.append(
    h('h1', null, 'Approvals'),
    h('p', { class: 'lead' }, 'Runs the team policy asks a person about. Approving lets the caller retry that exact call once, with the approval id.'),
    msg.status,
    msg.error,
    h('h2', null, 'Waiting for a decision'),
    pending,
    h('h2', null, 'Recent'),
    recent,
  );
  const decide: Decide = async (id, verb) => {
    msg.clear();
    try {
      const r = await api<{ approval: ApprovalView }>('POST', '/approvals/' + encodeURIComponent(id) + '/' + verb, {});
      msg.say((verb === 'approve' ? 'Approved ' : 'Denied ') + id + ': ' + visible(r.approval.summary));
      await load();
    } catch (e) {
      msg.fail(e);
    }
  };
  const load = async () => {
    try {
      const [p, all] = await Promise.all([api<ApprovalList>('GET', '/approvals?status=pending'), api<ApprovalList>('GET', '/approvals?limit=25')]);
      pending.setAttribute('aria-busy', 'false');
      replaceKeepingFocus(pending, pendingView(p.approvals || [], decide));
      recent.replaceChildren(recentView((all.approvals || []).filter((a) => a.status !== 'pending')));
    } catch (e) {
      pending.setAttribute('aria-busy', 'false');
      if (isMissingRoute(e)) {
        msg.say('This gateway has no approvals (no GET /admin/v1/approvals).');
        return;
      }
      msg.fail(e);
    }
  };
  return poll(load, 3000);
}

function pendingView(list: ApprovalView[], decide: Decide): HTMLElement {
  if (list.length === 0) return h('p', { class: 'empty' }, 'Nothing is waiting for approval.');
  return table(
    'Pending approvals (' + list.length + ')',
    ['Approval', 'Asked by', 'Request', 'Why', 'Expires', 'Decision'],
    list.map((a) =>
      h(
        'tr',
        { 'data-approval': a.id },
        h('th', { scope: 'row' }, h('code', null, a.id)),
        h('td', null, userText(a.subject)),
        h('td', null, h('code', null, userText(a.summary))),
        h('td', { class: 'reason' }, userText(a.reason)),
        h('td', null, fmtTime(Date.parse(a.expires_at))),
        h(
          'td',
          null,
          h('button', { type: 'button', 'aria-label': 'Approve ' + a.id, onclick: () => decide(a.id, 'approve') }, 'Approve'),
          ' ',
          h('button', { type: 'button', class: 'danger', 'aria-label': 'Deny ' + a.id, onclick: () => decide(a.id, 'deny') }, 'Deny'),
        ),
      ),
    ),
  );
}

function recentView(list: ApprovalView[]): HTMLElement {
  if (list.length === 0) return h('p', { class: 'empty' }, 'No decided approvals yet.');
  return table(
    'Decided approvals',
    ['Approval', 'Status', 'Asked by', 'Request', 'Decided by', 'Run'],
    list.map((a) =>
      h(
        'tr',
        { 'data-approval': a.id },
        h('th', { scope: 'row' }, h('code', null, a.id)),
        h('td', null, h('span', { class: 'badge ' + a.status }, a.status)),
        h('td', null, userText(a.subject)),
        h('td', null, h('code', null, userText(a.summary))),
        h('td', null, userText(a.decided_by || ''), a.decided_at ? ' · ' + fmtTime(Date.parse(a.decided_at)) : ''),
        h('td', null, a.job_id ? h('a', { href: '#/jobs/' + encodeURIComponent(a.job_id) }, a.job_id) : ''),
      ),
    ),
  );
}
