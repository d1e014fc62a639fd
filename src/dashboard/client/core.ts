/**
 * Browser module `core.js`: the admin token session, the admin API client, a small DOM builder
 * and formatting helpers shared by every page. Plain JavaScript in a string (served as a file, so
 * the CSP needs no inline script); it avoids backticks and dollar-brace so it fits String.raw.
 */
import { visible } from '../../contracts/visible-text.ts';

export const CORE_JS = String.raw`
// The admin token lives in sessionStorage only: gone when the tab closes, never in a URL or a cookie.
const TOKEN_KEY = 'gatehouse.adminToken';

export const session = {
  token() { return sessionStorage.getItem(TOKEN_KEY); },
  set(t) { sessionStorage.setItem(TOKEN_KEY, t); },
  clear() { sessionStorage.removeItem(TOKEN_KEY); session.person = null; },
  // A person signed in with the identity provider: the HttpOnly session cookie goes along, the page
  // holds only the session's CSRF token and the team it acts in ({ csrf, team, email, teams }).
  person: null,
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const listeners = { unauthenticated: [] };
export function onUnauthenticated(fn) { listeners.unauthenticated.push(fn); }

/** Calls the admin API with the session's token as Bearer; errors become ApiError(code, message). */
export async function api(method, path, body, opts) {
  const token = (opts && opts.token) || session.token();
  const headers = { Accept: 'application/json' };
  const init = { method: method, headers: headers, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' };
  let base = '/admin/v1';
  if (token || !session.person) headers.Authorization = 'Bearer ' + token;
  else {
    base = '/dashboard/api/v1/teams/' + encodeURIComponent(session.person.team);
    headers['X-Gatehouse-CSRF'] = session.person.csrf;
    init.credentials = 'same-origin';
  }
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let r;
  try {
    r = await fetch(base + path, init);
  } catch (e) {
    throw new ApiError(0, 'network', 'the gateway did not answer (' + e.message + ')');
  }
  if (opts && opts.raw) {
    if (!r.ok) await failure(r, opts);
    return r;
  }
  if (!r.ok) await failure(r, opts);
  const text = await r.text();
  return text ? JSON.parse(text) : null;
}

async function failure(r, opts) {
  let code = 'http_' + r.status;
  let message = 'the gateway answered HTTP ' + r.status;
  try {
    const data = JSON.parse(await r.text());
    if (data && data.error) { code = data.error.code || code; message = data.error.message || message; }
  } catch (e) { /* not JSON */ }
  if (r.status === 401 && !(opts && opts.token)) listeners.unauthenticated.forEach((fn) => fn(message));
  throw new ApiError(r.status, code, message);
}

/** A route the gateway does not have yet (older deployment): the admin API answers 404 "no admin route". */
export function isMissingRoute(e) {
  return e instanceof ApiError && e.status === 404 && /^no admin route/.test(e.message);
}

/**
 * h('tag', {attrs}, ...children): builds DOM. Text is always a text node, so data from the API can
 * never become markup. 'on*' attributes become event listeners; 'class', 'for' map to properties.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const k of Object.keys(attrs)) {
      const v = attrs[k];
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'for') el.htmlFor = v;
      else if (k === 'value') el.value = v;
      else if (k === 'checked') el.checked = !!v;
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/**
 * visible(text, asWord, keepLines): text from users with every control, bidirectional and invisible
 * character written as an escape (\x1b, \u202e, \n); asWord quotes it as one argument when it is not
 * a plain word; keepLines leaves line breaks and tabs. The same function as the CLI's: its source is
 * src/contracts/visible-text.ts.
 */
export const visible = (${visible.toString()});

/**
 * Text a user, a client or an agent chose (a command's argument, a subject, a reason, a cwd, an
 * agent's id or version) as an element of its own: <bdi> isolates its direction from the text
 * around it, and visible() shows what would otherwise act on the page instead of being read. Every
 * page shows such text through this one helper.
 */
export function userText(v, asWord, cls) {
  if (v === undefined || v === null) return '';
  return h('bdi', cls ? { class: cls } : null, visible(typeof v === 'string' ? v : JSON.stringify(v), asWord));
}

/**
 * A stored command as one line a person can read and paste: argv elements shell-quoted where they
 * are not plain words, a shell string as written, every control or bidirectional character shown
 * as an escape (visible). Accepts an argv array, the audit log's { mode, command, args, runtime }
 * and a command the store kept only the start of ({ truncated, head }).
 */
export function commandText(c) {
  if (c === null || c === undefined) return '';
  const word = (x) => visible(typeof x === 'string' ? x : JSON.stringify(x), true);
  if (typeof c === 'string') return visible(c);
  if (Array.isArray(c)) return c.map(word).join(' ');
  if (typeof c === 'object' && c.truncated && typeof c.head === 'string') return visible(c.head) + '… (' + c.chars + ' characters stored in part)';
  if (typeof c === 'object' && typeof c.command === 'string') {
    const prefix = c.runtime ? '[' + visible(String(c.runtime)) + '] ' : '';
    if (c.mode === 'shell') return prefix + visible(c.command);
    return prefix + [c.command].concat(Array.isArray(c.args) ? c.args : []).map(word).join(' ');
  }
  return visible(JSON.stringify(c));
}

/**
 * A command for a table cell or a fact: up to max characters in one code element, the whole text
 * on hover (title) and, when it is longer, in a disclosure that opens with a click or Enter.
 */
export function commandView(c, max, keep) {
  const full = commandText(c);
  if (!full) return h('span', { class: 'sub' }, '…');
  const limit = max || 120;
  if (full.length <= limit) return h('code', { class: 'cmd', title: full }, h('bdi', null, full));
  // keep = { key, open: Set }: a live list re-renders every few seconds; an opened command stays open, and keeps focus.
  const d = h('details', { class: 'cmd', open: !!(keep && keep.open.has(keep.key)) },
    h('summary', { title: full, id: keep ? 'cmd-' + keep.key : null, tabindex: keep ? '0' : null }, h('code', null, h('bdi', null, full.slice(0, limit) + '…'))),
    h('code', { class: 'cmd full' }, h('bdi', null, full)));
  if (keep) d.addEventListener('toggle', () => { if (d.open) keep.open.add(keep.key); else keep.open.delete(keep.key); });
  return d;
}

const BAD_STATES = ['signaled', 'timed_out', 'lost', 'failed_to_start', 'refused'];
/**
 * How a job ended, for its colour: ok (exit 0), bad (a non-zero exit, a signal, a timeout, never
 * ran), open (queued, running) or neutral (cancelled by someone).
 */
export function jobOutcome(j) {
  const code = pick(j, 'exit_code', 'exitCode');
  if (j.state === 'exited') return code === 0 ? 'ok' : 'bad';
  if (BAD_STATES.includes(j.state)) return 'bad';
  if (j.state === 'queued' || j.state === 'running') return 'open';
  return 'neutral';
}

/** The job's state as a badge coloured by its outcome (exited with 128 is a failure, not a green badge). */
export function jobBadge(j) {
  const code = pick(j, 'exit_code', 'exitCode');
  const text = j.state === 'exited' && code !== 0 && code !== undefined ? 'exited ' + code : j.state;
  return h('span', { class: 'badge ' + j.state + ' ' + jobOutcome(j), 'data-state': j.state, 'data-outcome': jobOutcome(j) }, text);
}

let ids = 0;
export function uid(prefix) { ids += 1; return prefix + '-' + ids; }

/** A labelled control: label + input/select/textarea, optionally a hint. */
export function field(label, control, hint) {
  if (!control.id) control.id = uid('f');
  const parts = [h('label', { for: control.id }, label), control];
  if (hint) {
    const hid = uid('hint');
    control.setAttribute('aria-describedby', hid);
    parts.push(h('span', { class: 'hint', id: hid }, hint));
  }
  return h('div', { class: 'field' }, parts);
}

/** A polite status line and an assertive error line for a section. */
export function messages() {
  const status = h('p', { class: 'status', role: 'status' });
  const error = h('p', { class: 'error', role: 'alert' });
  return {
    status: status, error: error,
    say(t) { status.textContent = t || ''; },
    fail(e) { error.textContent = e ? describe(e) : ''; },
    clear() { status.textContent = ''; error.textContent = ''; },
  };
}

/** An error for the page: the gateway's message can quote what a caller sent, so it is shown visible (its line breaks kept). */
export function describe(e) {
  const text = e instanceof ApiError ? e.message + ' (' + e.code + ')' : (e && e.message) || String(e);
  return visible(text, false, true);
}

/**
 * A job's output as the page shows it: line breaks and tabs kept, every other control, bidirectional
 * or invisible character as its escape (an ESC sequence or a U+202E in a job's output is data, not
 * something that may reorder or hide what is around it).
 */
export function outputText(text) {
  return visible(text, false, true);
}

export function fmtTime(ms) {
  if (ms === null || ms === undefined) return '';
  const d = new Date(ms);
  return isNaN(d.getTime()) ? String(ms) : d.toLocaleString();
}

export function fmtAgo(ms, now) {
  if (ms === null || ms === undefined) return 'never';
  const s = Math.max(0, Math.round(((now || Date.now()) - ms) / 1000));
  if (s < 60) return s + ' s ago';
  if (s < 3600) return Math.floor(s / 60) + ' min ago';
  if (s < 86400) return Math.floor(s / 3600) + ' h ago';
  return Math.floor(s / 86400) + ' d ago';
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined) return '';
  if (ms < 1000) return ms + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
  return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return '';
  if (n < 1024) return n + ' B';
  if (n < 1048576) return (n / 1024).toFixed(1) + ' KiB';
  return (n / 1048576).toFixed(1) + ' MiB';
}

/** First defined of several possible field names (the API grows; the page reads what is there). */
export function pick(o, ...names) {
  for (const n of names) if (o && o[n] !== undefined && o[n] !== null) return o[n];
  return undefined;
}

/** A table with a caption and header cells (scope=col), one row per item. */
export function table(caption, headers, rows) {
  return h('table', null,
    h('caption', null, caption),
    h('thead', null, h('tr', null, headers.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', null, rows));
}

/**
 * Replaces a live region's content without losing the keyboard focus: the control that had focus
 * (found again by its href, aria-label or id) gets it back in the new content.
 */
export function replaceKeepingFocus(el, content) {
  const a = document.activeElement;
  const keyOf = (x) => x.getAttribute('href') || x.getAttribute('aria-label') || x.id || null;
  const key = a && a !== el && el.contains(a) ? keyOf(a) : null;
  el.replaceChildren(content);
  if (!key) return;
  const again = Array.from(el.querySelectorAll('a, button, [tabindex]')).find((x) => keyOf(x) === key);
  if (again) again.focus();
}

/**
 * Runs fn now and then every ms while the page shows; returns stop(). A slow answer is never
 * overlapped by the next call.
 */
export function poll(fn, ms) {
  let stopped = false;
  let timer = null;
  const tick = async () => {
    if (stopped) return;
    try { await fn(); } catch (e) { /* fn reports its own errors */ }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stopped = true; if (timer) clearTimeout(timer); };
}

/** Saves a Blob as a file (downloads go through fetch with the Bearer token, never a tokened URL). */
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
`;
