/**
 * The Policy page's network form: the team's `network` (mode and allowlist, the default every rule without its own
 * `network` gets) edited without touching the raw JSON. It reads from and writes into the editor's document, so
 * what is saved is still the JSON the editor shows; other keys, and each host's ports and methods, are kept.
 */
import type { NetworkAllow } from '../../contracts/network.ts';
import { field, h, uid } from './dom.ts';

/** The same host rule as the policy schema (src/contracts/network.ts), checked here to point at the line. */
const HOST_RE = /^(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.?$|^\[?[0-9A-Fa-f:.]+\]?$/;
const PRIVATE_WORD = 'private';
const MODES = ['off', 'allowlist', 'open'] as const;

type Doc = { network?: { mode?: string; allow?: NetworkAllow[] } & Record<string, unknown> } & Record<string, unknown>;

export interface EditorLink {
  /** The editor's document, or an error message when it is not a JSON object. */
  read(): { ok: true; value: Doc } | { ok: false; message: string };
  write(doc: Doc, note: string): void;
}

/** One line per host; `private` after the host lets it reach private addresses. */
const linesOf = (allow: NetworkAllow[]) => allow.map((a) => a.host + (a.privateAddresses ? ' ' + PRIVATE_WORD : '')).join('\n');

/** The allowlist the lines say, keeping what the document already holds for a host; or what is wrong, by line. */
function allowOf(text: string, before: NetworkAllow[]): { ok: true; allow: NetworkAllow[] } | { ok: false; message: string } {
  const allow: NetworkAllow[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const words = lines[i].trim().split(/\s+/).filter(Boolean);
    if (words.length === 0) continue;
    const [host, flag, ...rest] = words;
    if (!HOST_RE.test(host) || host.length > 253)
      return {
        ok: false,
        message: `Line ${i + 1}: "${host}" is not a host; write an exact name (registry.npmjs.org), a wildcard *.example.org, or an IP address.`,
      };
    if ((flag !== undefined && flag !== PRIVATE_WORD) || rest.length)
      return { ok: false, message: `Line ${i + 1}: after the host only the word "${PRIVATE_WORD}" may follow (it may reach private addresses).` };
    const kept = before.find((b) => b.host === host);
    const entry: NetworkAllow = { ...kept, host };
    if (flag === PRIVATE_WORD) entry.privateAddresses = true;
    else delete entry.privateAddresses;
    allow.push(entry);
  }
  return { ok: true, allow };
}

export function networkForm(editor: EditorLink): { element: HTMLElement; refresh(): void } {
  const errId = uid('net-err');
  const mode = h(
    'select',
    { name: 'network-mode' },
    MODES.map((m) => h('option', { value: m }, m)),
  );
  const hosts = h('textarea', {
    name: 'network-allow',
    rows: '5',
    spellcheck: 'false',
    class: 'code',
    placeholder: 'registry.npmjs.org\nnpm.internal.example private',
    'aria-describedby': errId,
  });
  const error = h('p', { class: 'error', id: errId, role: 'alert' });
  const apply = h('button', { type: 'submit' }, 'Write network into the editor');
  const form = h(
    'form',
    { class: 'card', 'aria-label': 'Network', novalidate: true },
    h('h3', null, 'Network'),
    h(
      'p',
      { class: 'sub' },
      "The team's network (policy key network): what every rule without its own network gets. Writes into the editor below; save there.",
    ),
    field('Network mode', mode, 'off: no network; allowlist: only the hosts below, through the agent’s egress proxy; open: any host.'),
    field(
      'Allowed hosts (one per line)',
      hosts,
      `Add "${PRIVATE_WORD}" after a host that may resolve to a private, loopback or link-local address (privateAddresses).`,
    ),
    error,
    apply,
  );

  const refresh = () => {
    const d = editor.read();
    if (!d.ok) return;
    mode.value = d.value.network?.mode ?? 'off';
    hosts.value = linesOf(d.value.network?.allow ?? []);
    error.textContent = '';
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const d = editor.read();
    if (!d.ok) {
      error.textContent = 'Fix the editor first: ' + d.message;
      return;
    }
    const before = d.value.network?.allow ?? [];
    const a = allowOf(hosts.value, before);
    if (!a.ok) {
      error.textContent = a.message;
      hosts.setAttribute('aria-invalid', 'true');
      hosts.focus();
      return;
    }
    hosts.removeAttribute('aria-invalid');
    error.textContent = '';
    const doc: Doc = { ...d.value, network: { ...d.value.network, mode: mode.value, allow: a.allow } };
    editor.write(doc, `Network written into the editor (${mode.value}, ${a.allow.length} host(s)); save to make it current.`);
  });
  return { element: form, refresh };
}
