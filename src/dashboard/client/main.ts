/**
 * The dashboard's entry module (bundled into main.js): sign-in, navigation and the hash router. Each page module
 * exports render(main, params, me, query) and returns a cleanup function (stops its polling), or null.
 */
import { render as renderAgents } from './agents.ts';
import { ApiError, api, describe, onUnauthenticated, session } from './api.ts';
import type { PersonSession, WhoAmI } from './answers.ts';
import { render as renderApprovals } from './approvals.ts';
import { render as renderAudit } from './audit.ts';
import { field, h, messages } from './dom.ts';
import { userText } from './format.ts';
import { render as renderJobs } from './job-list.ts';
import { render as renderMine } from './me.ts';
import { render as renderMembers } from './members.ts';
import { render as renderOverview } from './overview.ts';
import { render as renderPolicy } from './policy.ts';
import { render as renderScripts } from './scripts.ts';
import { render as renderTokens } from './tokens.ts';
import { render as renderWorkspaces } from './workspaces.ts';

interface Page {
  path: string;
  title: string;
  render(main: HTMLElement, params: string[], me: WhoAmI, query: URLSearchParams): (() => void) | null | undefined;
}

const PAGES: Page[] = [
  { path: 'overview', title: 'Overview', render: renderOverview },
  { path: 'agents', title: 'Agents', render: renderAgents },
  { path: 'jobs', title: 'Jobs', render: renderJobs },
  { path: 'audit', title: 'Audit', render: renderAudit },
  { path: 'policy', title: 'Policy', render: renderPolicy },
  { path: 'scripts', title: 'Scripts', render: renderScripts },
  { path: 'workspaces', title: 'Workspaces', render: renderWorkspaces },
  { path: 'tokens', title: 'Tokens', render: renderTokens },
  { path: 'approvals', title: 'Approvals', render: renderApprovals },
  { path: 'members', title: 'Members', render: renderMembers },
];
// A signed-in person's own jobs and connected clients: the one page of a member, one more page for an owner or admin.
const MINE: Page = { path: 'me', title: 'You', render: renderMine };
// The team a person in several teams last picked (this tab only).
const TEAM_KEY = 'gatehouse.team';

const byId = (id: string) => document.getElementById(id) as HTMLElement;
const main = byId('main');
const nav = byId('nav');
const who = byId('who');
const signout = byId('signout');
let cleanup: (() => void) | null = null;
let me: WhoAmI | null = null;
let pages = PAGES;
// Where the identity provider's sign-in starts (GET /dashboard/auth/session says), null without one.
let signInUrl: string | null = null;

function clearPage(): void {
  if (cleanup) {
    try {
      cleanup();
    } catch {
      /* ignore */
    }
  }
  cleanup = null;
  main.replaceChildren();
}

function signIn(reason?: string): void {
  clearPage();
  me = null;
  nav.replaceChildren();
  who.textContent = '';
  signout.hidden = true;
  const sw = document.getElementById('team-switch');
  if (sw) sw.remove();
  document.title = 'Sign in · Gatehouse';
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', spellcheck: 'false', required: true });
  const msg = messages();
  const form = h(
    'form',
    { class: 'card signin', 'aria-labelledby': 'signin-title', novalidate: true },
    h('h1', { id: 'signin-title', tabindex: '-1' }, 'Sign in to Gatehouse'),
    h(
      'p',
      null,
      'Paste an admin token of your team (a token with the admin scope, e.g. from ',
      h('code', null, 'gatehouse token create --scope admin'),
      '). It stays in this browser tab only and is sent to this gateway as a Bearer header.',
    ),
    field('Admin token', input),
    h('button', { type: 'submit' }, 'Sign in'),
    msg.status,
    msg.error,
  );
  if (signInUrl) {
    form.insertBefore(
      h(
        'p',
        null,
        h(
          'a',
          { id: 'idp-signin', class: 'button', href: signInUrl + '?next=' + encodeURIComponent('/dashboard' + location.hash) },
          'Sign in with your identity provider',
        ),
        ' — or, for automation and break-glass:',
      ),
      form.children[1],
    );
  }
  if (reason) msg.error.textContent = reason;
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.clear();
    const t = input.value.trim();
    if (!t) {
      msg.error.textContent = 'Enter an admin token.';
      input.focus();
      return;
    }
    msg.say('Checking the token…');
    try {
      const w = await api<WhoAmI>('GET', '/whoami', undefined, { token: t });
      session.set(t);
      input.value = '';
      start(w);
    } catch (e) {
      msg.say('');
      msg.fail(e);
      input.focus();
    }
  });
  main.appendChild(form);
  input.focus();
}

/** A person in several teams picks the one they act in; the page starts again in it. */
function teamSwitch(teams: PersonSession['teams'], current: string): void {
  if (teams.length < 2) return;
  const sel = h(
    'select',
    { id: 'team-switch', 'aria-label': 'Team' },
    teams.map((t) => h('option', { value: t.team, selected: t.team === current }, t.team + ' (' + t.role + ')')),
  );
  sel.addEventListener('change', () => {
    sessionStorage.setItem(TEAM_KEY, sel.value);
    location.hash = '';
    location.reload();
  });
  signout.before(sel);
}

function start(w: WhoAmI, available?: Page[]): void {
  me = w;
  pages = available || PAGES;
  who.replaceChildren(
    h(
      'span',
      null,
      'team ',
      userText(w.team),
      ' · ',
      session.person ? [userText(session.person.email), ' (' + session.person.role + ')'] : userText(w.subject),
    ),
  );
  signout.hidden = false;
  nav.replaceChildren(
    h(
      'ul',
      null,
      pages.map((p) => h('li', null, h('a', { href: '#/' + p.path, 'data-page': p.path }, p.title))),
    ),
  );
  if (!location.hash || location.hash === '#' || location.hash === '#/') location.hash = '#/' + pages[0].path;
  else route();
}

function route(): void {
  if (!me) return;
  // #/page/param?query: the query presets a page's filters (the overview links to #/audit?decision=denied).
  const raw = location.hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const query = new URLSearchParams(q === -1 ? '' : raw.slice(q + 1));
  const parts = (q === -1 ? raw : raw.slice(0, q)).split('/').map(decodeURIComponent);
  const page = pages.find((p) => p.path === parts[0]) || pages[0];
  for (const a of nav.querySelectorAll('a')) {
    if (a.getAttribute('data-page') === page.path) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  clearPage();
  document.title = page.title + ' · Gatehouse';
  try {
    cleanup = page.render(main, parts.slice(1), me, query) || null;
  } catch (e) {
    main.appendChild(h('p', { class: 'error', role: 'alert' }, describe(e)));
  }
  const title = main.querySelector('h1');
  if (title) {
    title.setAttribute('tabindex', '-1');
    title.focus();
  }
}

window.addEventListener('hashchange', route);
signout.addEventListener('click', async () => {
  const person = session.person;
  session.clear();
  sessionStorage.removeItem(TEAM_KEY);
  if (person) {
    await fetch('/dashboard/auth/logout', { method: 'POST', credentials: 'same-origin', headers: { 'X-Gatehouse-CSRF': person.csrf } }).catch(() => null);
  }
  signIn();
});
onUnauthenticated((message) => {
  session.clear();
  signIn('Signed out: ' + message);
});

/** The identity provider's session, if any: the person, their teams and roles, the CSRF token. */
async function personSession(): Promise<PersonSession | null> {
  try {
    const r = await fetch('/dashboard/auth/session', { credentials: 'same-origin', cache: 'no-store' });
    return r.ok ? await r.json() : null;
  } catch {
    return null;
  }
}

(async () => {
  const t = session.token();
  if (!t) {
    const s = await personSession();
    signInUrl = s?.signInUrl || null;
    if (!s?.signedIn) return signIn();
    if (!s.teams.length) return signIn((s.email || s.subject) + ' is signed in but not a member of any team: ask a team owner or admin for an invitation.');
    // The team picked last in this tab, else the first the person manages (owner or admin), else their first.
    const picked = sessionStorage.getItem(TEAM_KEY);
    const chosen = s.teams.find((x) => x.team === picked) || s.teams.find((x) => x.role !== 'member') || s.teams[0];
    session.person = { csrf: s.csrf, team: chosen.team, role: chosen.role, email: (s.email || s.subject) as string };
    teamSwitch(s.teams, chosen.team);
    // A member sees their own page only: the team pages (the admin API) are for owners and admins.
    if (chosen.role === 'member') return start({ team: chosen.team, subject: 'member:' + chosen.memberId }, [MINE]);
    try {
      // GET /teams/<team> is who-am-i in the team the person acts in.
      return start(await api<WhoAmI>('GET', ''), PAGES.concat([MINE]));
    } catch (e) {
      session.clear();
      return signIn(describe(e));
    }
  }
  try {
    start(await api<WhoAmI>('GET', '/whoami'));
  } catch (e) {
    // A 401 already went back to the sign-in form (onUnauthenticated); anything else is said there too.
    if (!(e instanceof ApiError && e.status === 401)) {
      session.clear();
      signIn(describe(e));
    }
  }
})();
