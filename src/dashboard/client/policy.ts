/** The Policy page: the current policy and its history, an editor with inline errors, presets, a dry run. */
import { api, describe, isMissingRoute } from './api.ts';
import type { CurrentPolicy, PolicyDecision, PolicyHistory, PolicyPreset } from './answers.ts';
import { field, h, messages, table, uid } from './dom.ts';
import { fmtTime, userText } from './format.ts';
import { networkForm } from './policy-network.ts';

type Parsed = { ok: true; value: unknown } | { ok: false; message: string };

export function render(main: HTMLElement): null {
  const current = h('dl', { class: 'facts' });
  const msg = messages();
  const errId = uid('policy-err');
  const editor = h('textarea', { name: 'policy', rows: '24', spellcheck: 'false', class: 'code', 'aria-describedby': errId });
  const editorError = h('p', { class: 'error', id: errId, role: 'alert' });
  const save = h('button', { type: 'submit' }, 'Save as new version');
  const format = h('button', { type: 'button' }, 'Check JSON and format');
  const reload = h('button', { type: 'button' }, 'Discard changes');
  const presetSel = h('select', { name: 'preset' });
  const presetBtn = h('button', { type: 'button' }, 'Load as a starting point');
  const presetInfo = h('p', { class: 'sub' });
  const history = h('div');
  let presets: PolicyPreset[] = [];

  const showError = (text: string) => {
    editorError.textContent = text || '';
    if (text) editor.setAttribute('aria-invalid', 'true');
    else editor.removeAttribute('aria-invalid');
  };
  /** Parses the editor; on a syntax error says where (line and column) and selects the spot. */
  const parseEditor = (): Parsed => {
    try {
      return { ok: true, value: JSON.parse(editor.value) };
    } catch (e) {
      const message = (e as Error).message;
      const m = /position (\d+)/.exec(message);
      let where = '';
      if (m) {
        const pos = Number(m[1]);
        const before = editor.value.slice(0, pos).split('\n');
        where = ' at line ' + before.length + ', column ' + (before[before.length - 1].length + 1);
        editor.setSelectionRange(pos, pos + 1);
      }
      return { ok: false, message: 'Not valid JSON' + where + ': ' + message };
    }
  };

  const network = networkForm({
    read: () => {
      const p = parseEditor();
      if (!p.ok) return p;
      return p.value && typeof p.value === 'object' && !Array.isArray(p.value)
        ? { ok: true, value: p.value as Record<string, never> }
        : { ok: false, message: 'the policy document is not a JSON object' };
    },
    write: (doc, note) => {
      editor.value = JSON.stringify(doc, null, 2);
      showError('');
      msg.say(note);
    },
  });
  editor.addEventListener('change', () => network.refresh());

  const loadCurrent = async () => {
    try {
      const p = await api<CurrentPolicy>('GET', '/policy');
      current.replaceChildren(
        h('dt', null, 'Version'),
        h('dd', { 'data-version': p.version }, p.isDefault ? '0 (the shipped default; no policy set yet)' : String(p.version)),
        h('dt', null, 'Updated'),
        h('dd', null, p.updatedAt ? fmtTime(p.updatedAt) + ' by ' + p.updatedBy : '—'),
      );
      editor.value = JSON.stringify(p.policy, null, 2);
      showError('');
      network.refresh();
    } catch (e) {
      msg.fail(e);
    }
    try {
      const r = await api<PolicyHistory>('GET', '/policy/history');
      const versions = r.versions || [];
      history.replaceChildren(
        versions.length === 0
          ? h('p', { class: 'empty' }, 'No versions saved yet.')
          : table(
              'Policy versions',
              ['Version', 'Saved', 'By', ''],
              versions.map((v) =>
                h(
                  'tr',
                  null,
                  h('th', { scope: 'row' }, String(v.version)),
                  h('td', null, fmtTime(v.updatedAt)),
                  h('td', null, v.updatedBy),
                  h(
                    'td',
                    null,
                    v.policy
                      ? h(
                          'button',
                          {
                            type: 'button',
                            onclick: () => {
                              editor.value = JSON.stringify(v.policy, null, 2);
                              network.refresh();
                              msg.say('Version ' + v.version + ' loaded into the editor; save to make it current.');
                              editor.focus();
                            },
                          },
                          'Load version ' + v.version,
                        )
                      : '',
                  ),
                ),
              ),
            ),
      );
    } catch (e) {
      history.replaceChildren(h('p', { class: 'sub' }, isMissingRoute(e) ? 'This gateway keeps only the current version.' : describe(e)));
    }
  };

  const form = h(
    'form',
    { 'aria-label': 'Policy editor', novalidate: true },
    field('Policy document (JSON)', editor),
    editorError,
    h('div', { class: 'row' }, save, format, reload),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.clear();
    const parsed = parseEditor();
    if (!parsed.ok) {
      showError(parsed.message);
      editor.focus();
      return;
    }
    save.disabled = true;
    try {
      const p = await api<{ version: number }>('PUT', '/policy', parsed.value);
      showError('');
      msg.say('Saved: the policy is now version ' + p.version + '.');
      await loadCurrent();
    } catch (e) {
      // The gateway names the failing path ("invalid policy: limits.maxTimeoutMs: …"): show it at the editor.
      showError(describe(e));
      editor.focus();
    }
    save.disabled = false;
  });
  format.addEventListener('click', () => {
    const parsed = parseEditor();
    if (!parsed.ok) {
      showError(parsed.message);
      editor.focus();
      return;
    }
    editor.value = JSON.stringify(parsed.value, null, 2);
    showError('');
    msg.say('The JSON is well-formed; the gateway checks the rest when you save.');
  });
  reload.addEventListener('click', () => {
    msg.clear();
    loadCurrent();
  });
  presetSel.addEventListener('change', () => {
    const p = presets.find((x) => x.name === presetSel.value);
    presetInfo.textContent = p ? 'Starting point "' + p.title + '": ' + p.description : '';
  });
  presetBtn.addEventListener('click', () => {
    const p = presets.find((x) => x.name === presetSel.value);
    if (!p) return;
    editor.value = JSON.stringify(p.policy, null, 2);
    showError('');
    network.refresh();
    msg.say('Preset "' + p.name + '" loaded into the editor as a starting point; the current policy is unchanged until you save.');
    editor.focus();
  });

  main.append(
    h('h1', null, 'Policy'),
    h('section', { 'aria-labelledby': 'pol-cur' }, h('h2', { id: 'pol-cur' }, 'Current version'), current, msg.status, msg.error),
    h(
      'section',
      { 'aria-labelledby': 'pol-edit' },
      h('h2', { id: 'pol-edit' }, 'Edit'),
      h(
        'div',
        { class: 'card', role: 'group', 'aria-labelledby': 'pol-presets' },
        h('h3', { id: 'pol-presets' }, 'Start from a preset'),
        h(
          'p',
          { class: 'sub' },
          'Presets are starting points, not the current policy (that is above): loading one replaces the editor’s text, and nothing changes until you save.',
        ),
        h('div', { class: 'row' }, field('Starting point', presetSel), presetBtn),
        presetInfo,
      ),
      network.element,
      form,
    ),
    dryRun(),
    h('section', { 'aria-labelledby': 'pol-hist' }, h('h2', { id: 'pol-hist' }, 'History'), history),
  );

  fetch('/dashboard/presets.json', { credentials: 'omit' })
    .then((r) => r.json() as Promise<{ presets?: PolicyPreset[] }>)
    .then((list) => {
      presets = list.presets || [];
      presetSel.replaceChildren(...presets.map((p) => h('option', { value: p.name }, p.title)));
      presetSel.dispatchEvent(new Event('change'));
    })
    .catch((e: Error) => {
      presetInfo.textContent = 'Presets unavailable: ' + e.message;
    });
  loadCurrent();
  return null;
}

/** "Would the current policy allow this?": POST /policy/check with a command as a client would send it. */
function dryRun(): HTMLElement {
  const command = h('input', { type: 'text', name: 'command', required: true, placeholder: 'git' });
  const args = h('textarea', { name: 'args', rows: '3', spellcheck: 'false', class: 'code', placeholder: 'status\n--short' });
  const shell = h('input', { type: 'checkbox', name: 'shell' });
  const runtime = h('input', { type: 'text', name: 'runtime', placeholder: 'none (plain execute)' });
  const cwd = h('input', { type: 'text', name: 'cwd', placeholder: 'workspace root' });
  const result = h('div', { class: 'decision', 'aria-live': 'polite' });
  const msg = messages();
  const form = h(
    'form',
    { class: 'filters', 'aria-label': 'Dry run', novalidate: true },
    field('Command', command),
    field('Arguments (one per line)', args),
    h('div', { class: 'field check' }, shell, h('label', { for: (shell.id = uid('f')) }, 'A shell string (sh -c command; arguments ignored)')),
    field('Runtime', runtime, 'runtime_execute only, e.g. python'),
    field('Working directory', cwd),
    h('button', { type: 'submit' }, 'Check'),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.clear();
    result.replaceChildren();
    if (!command.value.trim()) {
      msg.fail(new Error('enter a command to check'));
      command.focus();
      return;
    }
    const body: { command: string; args?: string[]; runtime?: string; cwd?: string } = { command: command.value.trim() };
    if (!shell.checked)
      body.args = args.value
        .split('\n')
        .map((s) => s.replace(/\r$/, ''))
        .filter((s) => s !== '');
    if (runtime.value.trim()) body.runtime = runtime.value.trim();
    if (cwd.value.trim()) body.cwd = cwd.value.trim();
    try {
      const d = await api<PolicyDecision>('POST', '/policy/check', body);
      result.replaceChildren(
        h(
          'p',
          {
            class: 'verdict ' + (d.decision === 'ask' ? 'ask' : d.allowed ? 'allowed' : 'denied'),
            'data-allowed': String(d.allowed),
            'data-decision': d.decision || (d.allowed ? 'allow' : 'deny'),
          },
          d.decision === 'ask' ? 'Needs approval (ask)' : d.allowed ? 'Allowed' : 'Denied',
        ),
        h(
          'dl',
          { class: 'facts' },
          h('dt', null, 'Deciding stage'),
          h('dd', null, d.stage || '—'),
          h('dt', null, 'Reason'),
          h('dd', null, d.reason ? userText(d.reason) : '—'),
          d.notes?.length ? [h('dt', null, 'Notes'), h('dd', null, userText(d.notes.join('; ')))] : null,
          h('dt', null, 'Policy version'),
          h('dd', null, String(d.policyVersion)),
        ),
      );
    } catch (e) {
      msg.fail(e);
    }
  });
  return h(
    'section',
    { 'aria-labelledby': 'pol-dry' },
    h('h2', { id: 'pol-dry' }, 'Dry run'),
    h('p', { class: 'sub' }, 'Would the current policy allow this? Nothing runs.'),
    form,
    msg.status,
    msg.error,
    result,
  );
}
