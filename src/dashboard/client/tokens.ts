/** The Tokens page: create a token (shown once), list the team's tokens and OAuth grants, revoke either. */
import { api } from './api.ts';
import type { NewToken, OAuthGrant, TokenRecord } from './answers.ts';
import { field, h, type Messages, messages, table, uid } from './dom.ts';
import { fmtTime, userText, visible } from './format.ts';

const SCOPES = [
  ['execute', 'run jobs (execute, runtime_execute, policy_check)'],
  ['artifacts:read', 'read stored output (query_output)'],
  ['admin', 'manage the team: tokens, policy, audit, this dashboard'],
  ['agent', 'an executor agent joining the team'],
];
const TTLS = [
  ['3600', '1 hour'],
  ['28800', '8 hours'],
  ['86400', '1 day'],
  ['604800', '7 days'],
  ['2592000', '30 days'],
  ['7776000', '90 days'],
  ['31536000', '1 year'],
];

export function render(main: HTMLElement): null {
  const listMsg = messages();
  const list = h('div');
  const created = h('div', { class: 'once', 'aria-live': 'polite' });

  const load = async () => {
    try {
      const r = await api<{ tokens: TokenRecord[] }>('GET', '/tokens');
      listMsg.fail(null);
      list.replaceChildren(view(r.tokens, load, listMsg));
    } catch (e) {
      listMsg.fail(e);
    }
  };

  const grantMsg = messages();
  const grants = h('div');
  const loadGrants = async () => {
    try {
      const r = await api<{ grants: OAuthGrant[] }>('GET', '/oauth/grants');
      grantMsg.fail(null);
      grants.replaceChildren(grantView(r.grants, loadGrants, grantMsg));
    } catch (e) {
      grantMsg.fail(e);
    }
  };
  const reloadAll = () => {
    load();
    loadGrants();
  };

  main.append(
    h('h1', null, 'Tokens'),
    createForm(created, reloadAll),
    created,
    h('section', { 'aria-labelledby': 'tok-list' }, h('h2', { id: 'tok-list' }, 'Tokens of this team'), listMsg.status, listMsg.error, list),
    h(
      'section',
      { 'aria-labelledby': 'grant-list' },
      h('h2', { id: 'grant-list' }, 'OAuth grants (MCP clients an admin connected)'),
      h('p', null, 'Revoking a grant ends its access and refresh tokens at once; revoking the admin token that consented ends its grants too.'),
      grantMsg.status,
      grantMsg.error,
      grants,
    ),
  );
  // Revoking a token may end grants: both lists are reloaded after it.
  revokeHook = reloadAll;
  load();
  loadGrants();
  return null;
}

let revokeHook: (() => void) | null = null;

// The gateway says what a grant is now: pending (code not exchanged yet), abandoned, active, expired or revoked.
function grantStatus(g: OAuthGrant): string | undefined {
  return g.state === 'abandoned' ? 'never completed' : g.state;
}

/** Client names are chosen by whoever registered the client: shown as data (userText), never as markup or bidi control. */
function grantView(grants: OAuthGrant[], reload: () => void, msg: Messages): HTMLElement {
  if (!grants || grants.length === 0) return h('p', { class: 'empty' }, 'No MCP client has been granted access to this team.');
  return table(
    'OAuth grants (' + grants.length + ')',
    ['Grant id', 'Client', 'Consented by', 'Scopes', 'Created', 'Last used', 'Status', ''],
    grants.map((g) => {
      const st = grantStatus(g);
      let revoke: HTMLButtonElement | '' = '';
      if (st === 'active' || st === 'pending') {
        const button = h('button', { type: 'button', class: 'danger', 'aria-label': 'Revoke OAuth grant ' + g.grantId }, 'Revoke');
        button.addEventListener('click', async () => {
          if (!window.confirm('Revoke OAuth grant ' + g.grantId + '? The client is refused from its next request and must be authorized again.')) return;
          button.disabled = true;
          try {
            await api('DELETE', '/oauth/grants/' + encodeURIComponent(g.grantId));
            msg.say('Revoked OAuth grant ' + g.grantId + '.');
            reload();
          } catch (e) {
            msg.fail(e);
            button.disabled = false;
          }
        });
        revoke = button;
      }
      return h(
        'tr',
        { 'data-grant': g.grantId, 'data-status': st, title: g.revokedReason || '' },
        h('th', { scope: 'row' }, h('code', null, g.grantId)),
        h('td', null, g.clientName ? userText(g.clientName, false, 'client-name') : '(unnamed)', h('br'), h('small', null, userText(g.clientId))),
        h('td', { class: 'subject' }, userText(g.subject)),
        h('td', null, (g.scopes || []).join(' ')),
        h('td', null, fmtTime(g.createdAt)),
        h('td', null, g.lastUsedAt ? fmtTime(g.lastUsedAt) : 'never'),
        h('td', null, h('span', { class: 'badge ' + st }, st)),
        h('td', null, revoke),
      );
    }),
  );
}

function createForm(created: HTMLElement, reload: () => void): HTMLElement {
  const msg = messages();
  const subject = h('input', { type: 'text', name: 'subject', required: true, maxlength: '200', placeholder: 'ci-bot', autocomplete: 'off' });
  const ttl = h(
    'select',
    { name: 'ttl' },
    TTLS.map(([v, t]) => h('option', { value: v, selected: v === '2592000' }, t)),
  );
  const note = h('input', { type: 'text', name: 'note', maxlength: '500', placeholder: 'what it is for' });
  const boxes = SCOPES.map(([s, what]) => {
    const id = uid('scope');
    return {
      s: s,
      input: h('input', { type: 'checkbox', name: 'scope', value: s, id: id, checked: s === 'execute' || s === 'artifacts:read' }),
      label: h('label', { for: id }, h('code', null, s), ' — ' + what),
    };
  });
  const form = h(
    'form',
    { class: 'filters', 'aria-label': 'Create a token', novalidate: true },
    field('Subject', subject, 'who or what uses it: printable ASCII, no spaces'),
    h(
      'fieldset',
      null,
      h('legend', null, 'Scopes'),
      boxes.map((b) => h('div', { class: 'field check' }, b.input, b.label)),
    ),
    field('Expires after', ttl),
    field('Note', note),
    h('button', { type: 'submit' }, 'Create token'),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.clear();
    created.replaceChildren();
    const scopes = boxes.filter((b) => b.input.checked).map((b) => b.s);
    const body: { subject: string; scopes: string[]; ttlSeconds: number; note?: string } = {
      subject: subject.value.trim(),
      scopes: scopes,
      ttlSeconds: Number(ttl.value),
    };
    if (note.value.trim()) body.note = note.value.trim();
    try {
      const t = await api<NewToken>('POST', '/tokens', body);
      const out = h('textarea', { readonly: true, rows: '4', class: 'code', id: uid('tok'), 'data-token': 'new' });
      out.value = t.token;
      const copy = h('button', { type: 'button' }, 'Copy to clipboard');
      copy.addEventListener('click', async () => {
        try {
          await navigator.clipboard.writeText(t.token);
          copy.textContent = 'Copied';
        } catch {
          out.select();
          copy.textContent = 'Press Ctrl+C to copy';
        }
      });
      created.replaceChildren(
        h(
          'section',
          { class: 'card', 'aria-labelledby': 'tok-new' },
          h('h2', { id: 'tok-new' }, 'New token for ' + t.subject),
          h('p', { class: 'warn' }, 'This is the only time the token is shown. Copy it now; the gateway keeps only its id (' + t.jti + ').'),
          field('Token (' + t.scopes.join(' ') + ', expires ' + fmtTime(t.expiresAt) + ')', out),
          copy,
        ),
      );
      subject.value = '';
      note.value = '';
      out.focus();
      out.select();
      reload();
    } catch (e) {
      msg.fail(e);
      subject.focus();
    }
  });
  return h('section', { 'aria-labelledby': 'tok-create' }, h('h2', { id: 'tok-create' }, 'Create a token'), form, msg.status, msg.error);
}

// What an agent token lets its agents claim (the CLI's token create --sandbox/--label/--agent-id).
function grantText(g: TokenRecord['agentGrant']): string {
  if (!g) return '';
  return (
    ' (claims: sandbox ' + g.sandboxes.join(',') + (g.labels.length ? '; labels ' + g.labels.join(',') : '') + (g.agentId ? '; id ' + g.agentId : '') + ')'
  );
}

// Who minted a token: a token is never stronger than its minter, and a member's tokens end with their membership or role.
function minterText(t: TokenRecord): HTMLElement | string {
  const m = t.mintedBy;
  if (!m) return 'unrecorded (acts as admin)';
  if (m.kind === 'bootstrap') return 'bootstrap (signing key)';
  return userText((t.minterEmail || m.memberId) + ' (' + m.role + ')');
}

function status(t: TokenRecord, now: number): string {
  if (t.revokedAt) return 'revoked';
  if (t.expiresAt <= now) return 'expired';
  return 'active';
}

function view(tokens: TokenRecord[], reload: () => void, msg: Messages): HTMLElement {
  if (!tokens || tokens.length === 0) {
    return h(
      'p',
      { class: 'empty' },
      'No tokens recorded for this team yet. Tokens this gateway mints (here, gatehouse token create, npm start) are listed; one minted offline with the signing key is not, and is revoked by its id (gatehouse token revoke <jti> --unrecorded).',
    );
  }
  const now = Date.now();
  return table(
    'Tokens (' + tokens.length + ')',
    ['Token id', 'Subject', 'Scopes', 'Minted by', 'Created', 'Expires', 'Status', 'Note', ''],
    tokens.map((t) => {
      const st = status(t, now);
      let revoke: HTMLButtonElement | '' = '';
      if (st === 'active') {
        const button = h('button', { type: 'button', class: 'danger', 'aria-label': 'Revoke token ' + t.jti + ' of ' + t.subject }, 'Revoke');
        button.addEventListener('click', async () => {
          if (!window.confirm('Revoke the token of ' + t.subject + ' (' + t.jti + ')? Clients using it are refused from now on.')) return;
          button.disabled = true;
          try {
            await api('DELETE', '/tokens/' + encodeURIComponent(t.jti));
            msg.say('Revoked ' + t.jti + '.');
            (revokeHook || reload)();
          } catch (e) {
            msg.fail(e);
            button.disabled = false;
          }
        });
        revoke = button;
      }
      return h(
        'tr',
        { 'data-jti': t.jti, 'data-status': st },
        h('th', { scope: 'row' }, h('code', null, t.jti)),
        h('td', { class: 'subject' }, userText(t.subject)),
        h('td', null, (t.scopes || []).join(' ') + grantText(t.agentGrant)),
        h('td', { class: 'minter', title: 'Ends with ' + visible(t.endsWith || 'its revocation or expiry') }, minterText(t)),
        h('td', null, fmtTime(t.createdAt)),
        h('td', null, fmtTime(t.expiresAt)),
        h('td', null, h('span', { class: 'badge ' + st }, st)),
        h('td', { class: 'reason' }, userText(t.note || '')),
        h('td', null, revoke),
      );
    }),
  );
}
