/**
 * Browser module `main.js`: sign-in, navigation and the hash router. Each page module exports
 * render(main, params) and returns a cleanup function (stops its polling).
 */
export const MAIN_JS = String.raw`
import { api, ApiError, describe, field, h, messages, onUnauthenticated, session } from './core.js';
import * as agents from './agents.js';
import * as jobs from './jobs.js';
import * as audit from './audit.js';
import * as policy from './policy.js';
import * as tokens from './tokens.js';
import * as approvals from './approvals.js';
import * as overview from './overview.js';
import * as members from './members.js';

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

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const signout = document.getElementById('signout');
let cleanup = null;
let me = null;
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

/** A signed-in person with the member role: the team pages are for owners and admins. */
function memberOnly(s) {
  clearPage();
  who.textContent = s.email || s.subject;
  signout.hidden = false;
  main.appendChild(h('section', { class: 'card', id: 'member-only' },
    h('h1', null, 'Signed in'),
    h('p', null, 'You are a member of ', s.teams.map((t, i) => [i ? ', ' : '', h('strong', null, t.team), ' (' + t.role + ')']), '.'),
    h('p', null, 'Members connect their MCP clients with OAuth (the client opens this gateway\'s consent page, where you grant it as yourself) and run what the team policy allows. The team pages here are for owners and admins.')));
}

function start(w) {
  me = w;
  who.textContent = 'team ' + w.team + ' · ' + (session.person ? session.person.email + ' (' + session.person.role + ')' : w.subject);
  signout.hidden = false;
  nav.replaceChildren(h('ul', null, PAGES.map((p) => h('li', null, h('a', { href: '#/' + p.path, 'data-page': p.path }, p.title)))));
  if (!location.hash || location.hash === '#' || location.hash === '#/') location.hash = '#/overview';
  else route();
}

function route() {
  if (!me) return;
  // #/page/param?query: the query presets a page's filters (the overview links to #/audit?decision=denied).
  const raw = location.hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const query = new URLSearchParams(q === -1 ? '' : raw.slice(q + 1));
  const parts = (q === -1 ? raw : raw.slice(0, q)).split('/').map(decodeURIComponent);
  const page = PAGES.find((p) => p.path === parts[0]) || PAGES[0];
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
    // The first team the person manages (owner or admin); a member only sees what members may do.
    const managed = s.teams.find((x) => x.role !== 'member');
    if (!managed) return memberOnly(s);
    session.person = { csrf: s.csrf, team: managed.team, role: managed.role, email: s.email || s.subject };
    try {
      // GET /teams/<team> is who-am-i in the team the person acts in.
      return start(await api('GET', ''));
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
