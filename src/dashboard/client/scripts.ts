/**
 * The Scripts page: the team's script library (what `run_script {"name"}` runs). `#/scripts` lists the scripts;
 * `#/scripts/<name>` shows a script's versions and the source of the newest, or of `?version=N`.
 */
import type { ScriptSource, ScriptSummary, ScriptVersionView } from '../../contracts/scripts.ts';
import { api } from './api.ts';
import { h, messages, table } from './dom.ts';
import { fmtBytes, fmtTime, outputText, userText } from './format.ts';

export function render(main: HTMLElement, params: string[], _me: unknown, query: URLSearchParams): null {
  const msg = messages();
  const body = h('div', { 'aria-live': 'polite', 'aria-busy': 'true' });
  const name = params[0];
  main.append(
    h('h1', null, name ? ['Script ', userText(name, false, 'script-name')] : 'Scripts'),
    h(
      'p',
      { class: 'lead' },
      name
        ? h('a', { href: '#/scripts' }, 'All scripts')
        : 'The team’s script library: clients run a script with run_script {"name": …, "vars": {…}}; admins add versions with gatehouse scripts push <file>.',
    ),
    msg.status,
    msg.error,
    body,
  );
  const done = () => body.setAttribute('aria-busy', 'false');
  (name ? showScript(body, name, query.get('version')) : listScripts(body)).then(
    () => {
      msg.fail(null);
      done();
    },
    (e: unknown) => {
      msg.fail(e);
      done();
    },
  );
  return null;
}

async function listScripts(body: HTMLElement): Promise<void> {
  const r = await api<{ scripts: ScriptSummary[] }>('GET', '/scripts');
  if (!r.scripts.length) {
    body.replaceChildren(h('p', { class: 'empty' }, 'No scripts yet. Add one with gatehouse scripts push <file>.'));
    return;
  }
  body.replaceChildren(
    table(
      `Scripts (${r.scripts.length})`,
      ['Script', 'Newest version', 'Versions', 'Size', 'Pushed', 'By'],
      r.scripts.map((s) =>
        h(
          'tr',
          { 'data-script': s.name },
          h('th', { scope: 'row' }, h('a', { href: `#/scripts/${encodeURIComponent(s.name)}` }, userText(s.name, false, 'script-name'))),
          h('td', null, String(s.version)),
          h('td', null, String(s.versions)),
          h('td', null, fmtBytes(s.bytes)),
          h('td', null, fmtTime(s.createdAt)),
          h('td', null, userText(s.createdBy)),
        ),
      ),
    ),
  );
}

async function showScript(body: HTMLElement, name: string, version: string | null): Promise<void> {
  const path = `/scripts/${encodeURIComponent(name)}`;
  const [versions, source] = await Promise.all([
    api<{ versions: ScriptVersionView[] }>('GET', `${path}/versions`),
    api<ScriptSource>('GET', version ? `${path}?version=${encodeURIComponent(version)}` : path),
  ]);
  body.replaceChildren(
    table(
      `Versions (${versions.versions.length})`,
      ['Version', 'Size', 'SHA-256', 'Pushed', 'By'],
      versions.versions.map((v) =>
        h(
          'tr',
          { 'data-version': String(v.version), ...(v.version === source.version ? { 'aria-current': 'true' } : {}) },
          h('th', { scope: 'row' }, h('a', { href: `#/scripts/${encodeURIComponent(name)}?version=${v.version}` }, `version ${v.version}`)),
          h('td', null, fmtBytes(v.bytes)),
          h('td', null, h('code', null, v.sha256)),
          h('td', null, fmtTime(v.createdAt)),
          h('td', null, userText(v.createdBy)),
        ),
      ),
    ),
    h('h2', null, `Source of version ${source.version}`),
    // A text node, never markup; controls and bidirectional characters shown as escapes, like a job's output.
    h(
      'pre',
      { class: 'output', tabindex: '0', 'data-script-source': '', 'aria-label': `source of ${name} version ${source.version}` },
      outputText(source.source),
    ),
  );
}
