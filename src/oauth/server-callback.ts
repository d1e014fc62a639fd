/**
 * Where a remote MCP server's authorization server sends an admin's browser back after they connected the
 * team (`GET /oauth/servers/callback?code=…&state=…`): src/script/remote-oauth.ts checks the sealed state
 * and exchanges the code. The page says only whether it worked and for which server; it carries no token,
 * is never cached, sends no Referer (the URL holds the code) and runs no script.
 */
import { Hono } from 'hono';
import { html } from 'hono/html';
import type { AppEnv } from '../env.ts';
import { OAUTH_CALLBACK_PATH } from '../contracts/remote-oauth.ts';
import { publicOrigin } from '../auth/config.ts';
import { recordAudit } from '../dispatch/audit-client.ts';
import { finishConnect } from '../script/remote-oauth.ts';
import { visible } from '../contracts/visible-text.ts';

export const serverCallbackRoutes = new Hono<AppEnv>();

const page = (title: string, body: string) => html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title} — Gatehouse</title></head>
<body><main><h1>${title}</h1><p id="result">${visible(body, false, true)}</p></main></body></html>`;

serverCallbackRoutes.get(OAUTH_CALLBACK_PATH, async (c) => {
  c.header('Cache-Control', 'no-store');
  c.header('Referrer-Policy', 'no-referrer');
  c.header('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
  const q = (k: string) => c.req.query(k) || undefined;
  const r = await finishConnect(c.env, publicOrigin(c.req.raw, c.env), { state: q('state'), code: q('code'), iss: q('iss'), error: q('error') });
  if (!r.ok) return c.html(page('The server was not connected', `${r.code}: ${r.message}`), r.code === 'config_error' ? 500 : 400);
  await recordAudit(c.env, {
    team: r.team,
    subject: r.subject,
    tokenId: r.tokenId ?? undefined,
    tool: 'oauth.server_connected',
    command: { server: r.server, scopes: r.scope ? r.scope.split(' ') : [] },
    decision: 'allowed',
    reason: `connected remote MCP server ${r.server} with OAuth`,
  });
  return c.html(page('Connected', `servers.${r.server} is connected for the team's scripts. You can close this window.`));
});
