/**
 * Browser module `main.js`: sign-in, navigation and the hash router. Each page module exports
 * render(main, params) and returns a cleanup function (stops its polling).
 */
export const MAIN_JS = String.raw`
import { api, ApiError, describe, field, h, messages, onUnauthenticated, session, userText } from './core.js';
import * as agents from './agents.js';
import * as jobs from './jobs.js';
import * as audit from './audit.js';
import * as policy from './policy.js';
import * as tokens from './tokens.js';
import * as approvals from './approvals.js';
import * as overview from './overview.js';
import * as members from './members.js';
import * as mine from './me.js';

const PAGES = [
  { path: 'overview', title: 'Overview', mod: overview },
  { path: 'agents', title: 'Agents', mod: agents },
  { path: 'jobs', title: 'Jobs', mod: jobs },
  { path: 'audit', title: 'Audit', mod: audit },
  { path: 'policy', title: 'Policy', mod: policy },
  { path: 'tokens', title: 'Tokens', mod: tokens },
  { path: 'approvals', title: 'Approvals', mod: approvals },
  { path: 'members', title: 'Members', mod: members },
];
// A signed-in person's own jobs and connected clients: the one page of a member, one more page for an owner or admin.
const MINE = { path: 'me', title: 'You', mod: mine };
// The team a person in several teams last picked (this tab only).
const TEAM_KEY = 'gatehouse.team';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const signout = document.getElementById('signout');
let cleanup = null;
let me = null;
let pages = PAGES;
// Where the identity provider's sign-in starts (GET /dashboard/auth/session says), null without one.
let signInUrl = null;

function clearPage() {
  if (cleanup) { try { cleanup(); } catch (e) { /* ignore */ } }
  cleanup = null;
  main.replaceChildren();
}

function signIn(reason) {
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
  const form = h('form', { class: 'card signin', 'aria-labelledby': 'signin-title', novalidate: true },
    h('h1', { id: 'signin-title', tabindex: '-1' }, 'Sign in to Gatehouse'),
    h('p', null, 'Paste an admin token of your team (a token with the admin scope, e.g. from ',
      h('code', null, 'gatehouse token create --scope admin'), '). It stays in this browser tab only and is sent to this gateway as a Bearer header.'),
    field('Admin token', input),
    h('button', { type: 'submit' }, 'Sign in'),
    msg.status, msg.error);
  if (signInUrl) {
    form.insertBefore(h('p', null, h('a', { id: 'idp-signin', class: 'button', href: signInUrl + '?next=' + encodeURIComponent('/dashboard' + location.hash) }, 'Sign in with your identity provider'),
      ' — or, for automation and break-glass:'), form.children[1]);
  }
  if (reason) msg.error.textContent = reason;
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.clear();
    const t = input.value.trim();
    if (!t) { msg.error.textContent = 'Enter an admin token.'; input.focus(); return; }
    msg.say('Checking the token…');
    try {
      const w = await api('GET', '/whoami', undefined, { token: t });
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
function teamSwitch(teams, current) {
  if (teams.length < 2) return;
  const sel = h('select', { id: 'team-switch', 'aria-label': 'Team' },
    teams.map((t) => h('option', { value: t.team, selected: t.team === current }, t.team + ' (' + t.role + ')')));
  sel.addEventListener('change', () => {
    sessionStorage.setItem(TEAM_KEY, sel.value);
    location.hash = '';
    location.reload();
  });
  signout.before(sel);
}

function start(w, available) {
  me = w;
  pages = available || PAGES;
  who.replaceChildren(h('span', null, 'team ', userText(w.team), ' · ', session.person ? [userText(session.person.email), ' (' + session.person.role + ')'] : userText(w.subject)));
  signout.hidden = false;
  nav.replaceChildren(h('ul', null, pages.map((p) => h('li', null, h('a', { href: '#/' + p.path, 'data-page': p.path }, p.title)))));
  if (!location.hash || location.hash === '#' || location.hash === '#/') location.hash = '#/' + pages[0].path;
  else route();
}

function route() {
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
    cleanup = page.mod.render(main, parts.slice(1), me, query) || null;
  } catch (e) {
    main.appendChild(h('p', { class: 'error', role: 'alert' }, describe(e)));
  }
  const title = main.querySelector('h1');
  if (title) { title.setAttribute('tabindex', '-1'); title.focus(); }
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
onUnauthenticated((message) => { session.clear(); signIn('Signed out: ' + message); });

/** The identity provider's session, if any: the person, their teams and roles, the CSRF token. */
async function personSession() {
  try {
    const r = await fetch('/dashboard/auth/session', { credentials: 'same-origin', cache: 'no-store' });
    return r.ok ? await r.json() : null;
  } catch (e) {
    return null;
  }
}

(async () => {
  const t = session.token();
  if (!t) {
    const s = await personSession();
    signInUrl = (s && s.signInUrl) || null;
    if (!s || !s.signedIn) return signIn();
    if (!s.teams.length) return signIn((s.email || s.subject) + ' is signed in but not a member of any team: ask a team owner or admin for an invitation.');
    // The team picked last in this tab, else the first the person manages (owner or admin), else their first.
    const picked = sessionStorage.getItem(TEAM_KEY);
    const chosen = s.teams.find((x) => x.team === picked) || s.teams.find((x) => x.role !== 'member') || s.teams[0];
    session.person = { csrf: s.csrf, team: chosen.team, role: chosen.role, email: s.email || s.subject };
    teamSwitch(s.teams, chosen.team);
    // A member sees their own page only: the team pages (the admin API) are for owners and admins.
    if (chosen.role === 'member') return start({ team: chosen.team, subject: 'member:' + chosen.memberId }, [MINE]);
    try {
      // GET /teams/<team> is who-am-i in the team the person acts in.
      return start(await api('GET', ''), PAGES.concat([MINE]));
    } catch (e) {
      session.clear();
      return signIn(describe(e));
    }
  }
  try {
    start(await api('GET', '/whoami'));
  } catch (e) {
    // A 401 already went back to the sign-in form (onUnauthenticated); anything else is said there too.
    if (!(e instanceof ApiError && e.status === 401)) { session.clear(); signIn(describe(e)); }
  }
})();
`;
