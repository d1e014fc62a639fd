/**
 * The You page: a signed-in person's own page in the team they act in, whatever their role — the jobs their
 * clients ran and the MCP clients they connected (their OAuth grants), each of which they may revoke. It talks
 * to /dashboard/me/teams/<team>/… (src/dashboard/me.ts) with the session cookie and its CSRF token.
 */
import { ApiError, type Person, session } from './api.ts';
import type { AdminJob, OAuthGrant } from './answers.ts';
import { h, messages, table } from './dom.ts';
import { commandView, fmtAgo, fmtTime, jobBadge, userText } from './format.ts';

async function me<T>(method: string, path: string): Promise<T> {
  const p = session.person as Person;
  const r = await fetch('/dashboard/me/teams/' + encodeURIComponent(p.team) + path, {
    method: method,
    cache: 'no-store',
    credentials: 'same-origin',
    referrerPolicy: 'no-referrer',
    headers: { Accept: 'application/json', 'X-Gatehouse-CSRF': p.csrf },
  });
  const text = await r.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  if (!r.ok) {
    const err = data?.error || {};
    throw new ApiError(r.status, err.code || 'http_' + r.status, err.message || 'the gateway answered HTTP ' + r.status);
  }
  return data;
}

function grantStatus(g: OAuthGrant, now: number): string {
  if (g.revokedAt) return 'ended: ' + (g.revokedReason || 'revoked');
  if (g.expiresAt && g.expiresAt <= now) return 'expired';
  return 'active';
}

export function render(main: HTMLElement): null {
  const p = session.person as Person;
  const msg = messages();
  const jobs = h('div', { id: 'my-jobs' });
  const grants = h('div', { id: 'my-grants' });

  async function loadGrants(): Promise<void> {
    const d = await me<{ grants: OAuthGrant[] }>('GET', '/grants');
    const now = Date.now();
    if (!d.grants.length) return grants.replaceChildren(h('p', { class: 'empty' }, 'You have not connected an MCP client to team ' + p.team + ' yet.'));
    grants.replaceChildren(
      table(
        'Your connected clients (' + d.grants.length + ')',
        ['Client', 'Scopes', 'Connected', 'Last used', 'Status', ''],
        d.grants.map((g) => {
          const status = grantStatus(g, now);
          const revoke = status === 'active' ? h('button', { type: 'button', 'data-revoke-grant': g.grantId }, 'Revoke') : null;
          if (revoke)
            revoke.addEventListener('click', async () => {
              msg.clear();
              try {
                await me('DELETE', '/grants/' + encodeURIComponent(g.grantId));
                msg.say((g.clientName || g.clientId) + ' is disconnected: its tokens stop working on their next request.');
              } catch (e) {
                msg.fail(e);
              }
              await loadGrants().catch((e) => msg.fail(e));
            });
          return h(
            'tr',
            { 'data-grant-row': g.grantId },
            h('td', null, userText(g.clientName || '(unnamed client)'), h('div', { class: 'hint' }, userText(g.clientId))),
            h('td', null, g.scopes.join(' ')),
            h('td', null, fmtTime(g.createdAt)),
            h('td', { title: fmtTime(g.lastUsedAt) }, fmtAgo(g.lastUsedAt, now)),
            h('td', { 'data-status': status === 'active' ? 'active' : 'ended' }, userText(status)),
            h('td', null, revoke),
          );
        }),
      ),
    );
  }

  async function loadJobs(): Promise<void> {
    const d = await me<{ jobs: AdminJob[] }>('GET', '/jobs');
    if (!d.jobs.length) return jobs.replaceChildren(h('p', { class: 'empty' }, 'No jobs of yours in team ' + p.team + ' yet.'));
    jobs.replaceChildren(
      table(
        'Your jobs (newest ' + d.jobs.length + ')',
        ['Job', 'Command', 'State', 'Started'],
        d.jobs.map((j) =>
          h(
            'tr',
            { 'data-job-row': j.job_id },
            h('td', null, h('code', null, j.job_id), h('div', { class: 'hint' }, j.tool)),
            h('td', { class: 'command' }, commandView(j.call?.command, 100)),
            h('td', null, jobBadge(j)),
            h('td', null, fmtTime(j.created_at)),
          ),
        ),
      ),
    );
  }

  main.append(
    h('h1', null, 'You in ' + p.team),
    h(
      'p',
      { id: 'my-role' },
      'Signed in as ',
      userText(p.email),
      ', ',
      h('strong', null, p.role),
      ' of team ',
      h('strong', null, p.team),
      '. ',
      p.role === 'member'
        ? "Members connect MCP clients with OAuth (the client opens this gateway's consent page, where you grant it as yourself) and run what the team policy allows; the team pages are for owners and admins."
        : 'The team pages are in the navigation above.',
    ),
    msg.status,
    msg.error,
    h(
      'section',
      { 'aria-labelledby': 'my-grants-title' },
      h('h2', { id: 'my-grants-title' }, 'Connected clients'),
      h('p', null, 'Each is an OAuth grant you consented to: the client acts as you. Revoking one ends its tokens at once.'),
      grants,
    ),
    h('section', { 'aria-labelledby': 'my-jobs-title' }, h('h2', { id: 'my-jobs-title' }, 'Your jobs'), jobs),
  );
  loadGrants().catch((e) => msg.fail(e));
  loadJobs().catch((e) => msg.fail(e));
  return null;
}
