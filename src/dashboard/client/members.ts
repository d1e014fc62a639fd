/**
 * The Members page: the team's members (role, email, last seen) and pending invitations; invite by email (the
 * one-time link is shown once), change a role, remove, withdraw an invitation. The gateway decides who may do
 * what (src/members/roles.ts): a refusal is shown as it says it.
 */
import { api } from './api.ts';
import type { Invitation, MemberList } from './answers.ts';
import { field, h, messages, table } from './dom.ts';
import { fmtAgo, fmtTime, userText, visible } from './format.ts';

const ROLES = ['member', 'admin', 'owner'];

export function render(main: HTMLElement): null {
  const msg = messages();
  const list = h('div', { id: 'members-list' });
  const once = h('div', { class: 'once', 'aria-live': 'polite' });
  const email = h('input', { type: 'email', name: 'email', required: true, maxlength: '320', autocomplete: 'off', placeholder: 'dana@example.com' });
  const role = h(
    'select',
    { name: 'role' },
    ROLES.map((r) => h('option', { value: r }, r)),
  );
  const form = h(
    'form',
    { class: 'card', id: 'invite-form', novalidate: true },
    h('h2', null, 'Invite'),
    field('Email', email, 'Whoever signs in with this address, verified by the identity provider, may take the invitation.'),
    field('Role', role),
    h('button', { type: 'submit' }, 'Invite'),
    once,
    msg.status,
    msg.error,
  );

  async function load(): Promise<void> {
    const d = await api<MemberList>('GET', '/members');
    const now = Date.now();
    const rows = d.members.map((m) => {
      const sel = h(
        'select',
        { 'aria-label': 'Role of ' + (m.email || m.memberId), 'data-member': m.memberId },
        ROLES.map((r) => h('option', { value: r, selected: r === m.role }, r)),
      );
      sel.addEventListener('change', async () => {
        msg.clear();
        try {
          const r = await api<{ sessionsEnded?: boolean; oauthGrantsEnded: unknown[] } | null>('PATCH', '/members/' + encodeURIComponent(m.memberId), {
            role: sel.value,
          });
          msg.say(
            visible(m.email || m.memberId) +
              ' is now ' +
              sel.value +
              '.' +
              (r?.sessionsEnded ? ' A lowered role: they are signed out and ' + r.oauthGrantsEnded.length + ' connected client(s) of theirs ended.' : ''),
          );
        } catch (e) {
          msg.fail(e);
        }
        await load().catch((e) => msg.fail(e));
      });
      const remove = h('button', { type: 'button', 'data-remove': m.memberId }, 'Remove');
      remove.addEventListener('click', async () => {
        msg.clear();
        try {
          await api('DELETE', '/members/' + encodeURIComponent(m.memberId));
          msg.say(visible(m.email || m.memberId) + ' was removed; they are signed out and their OAuth grants ended.');
        } catch (e) {
          msg.fail(e);
        }
        await load().catch((e) => msg.fail(e));
      });
      return h(
        'tr',
        { 'data-member-row': m.memberId },
        h('td', null, userText(m.email || '-'), h('div', { class: 'hint' }, userText(m.name || ''))),
        h('td', null, sel),
        h('td', { title: fmtTime(m.lastSeenAt) }, fmtAgo(m.lastSeenAt, now)),
        h('td', null, remove),
      );
    });
    const invites = d.invitations.map((i) => {
      const withdraw = h('button', { type: 'button' }, 'Withdraw');
      withdraw.addEventListener('click', async () => {
        msg.clear();
        try {
          await api('DELETE', '/members/invitations/' + encodeURIComponent(i.invitationId));
        } catch (e) {
          msg.fail(e);
        }
        await load().catch((e) => msg.fail(e));
      });
      return h('tr', null, h('td', null, userText(i.email)), h('td', null, i.role), h('td', null, fmtTime(i.expiresAt)), h('td', null, withdraw));
    });
    list.replaceChildren(
      d.members.length ? table('Members', ['Member', 'Role', 'Last seen', ''], rows) : h('p', null, 'No members yet: invite the first owner below.'),
      invites.length ? table('Pending invitations', ['Email', 'Role', 'Expires', ''], invites) : '',
    );
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    msg.clear();
    once.replaceChildren();
    if (!email.value.trim()) {
      msg.error.textContent = 'Enter an email address.';
      email.focus();
      return;
    }
    try {
      const r = await api<{ invitation: Invitation; url: string }>('POST', '/members/invitations', { email: email.value.trim(), role: role.value });
      once.replaceChildren(
        h(
          'p',
          null,
          'Send this link to ',
          userText(r.invitation.email),
          ' — it works once, until ',
          fmtTime(r.invitation.expiresAt),
          ', and is not shown again:',
        ),
        h('code', { id: 'invite-url' }, r.url),
      );
      email.value = '';
    } catch (e) {
      msg.fail(e);
    }
    await load().catch((e) => msg.fail(e));
  });

  main.append(h('h1', null, 'Members'), list, form);
  load().catch((e) => msg.fail(e));
  return null;
}
