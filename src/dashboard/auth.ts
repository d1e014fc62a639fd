/**
 * Sign-in and sign-out of people at /dashboard/auth (src/members/oidc.ts, session.ts):
 * `login` sends the browser to the identity provider, `callback` comes back with the session
 * cookie, `session` tells the dashboard who is signed in (their teams and roles, the CSRF token),
 * `logout` (a POST with the CSRF token) ends the session. API tokens keep working beside it.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { apiError } from '../admin/http.ts';
import { crossSiteRefusal, signedInIdentity } from '../members/auth.ts';
import { beginSignIn, finishSignIn, oidcConfig } from '../members/oidc.ts';
import { endSession, startSession } from '../members/session.ts';
import { membershipsOf } from '../store/members.ts';

export const authRoutes = new Hono<AppEnv>();

authRoutes.get('/login', async (c) => {
  const cfg = oidcConfig(c.env);
  if (!cfg.ok) return apiError(c, cfg.error.code, cfg.error.message);
  if (!cfg.value)
    return apiError(
      c,
      'not_found',
      'sign-in with an identity provider is not configured on this gateway (OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET: docs/members.md); sign in with an admin token',
    );
  return beginSignIn(c, cfg.value, c.req.query('next') ?? '/dashboard');
});

authRoutes.get('/callback', async (c) => {
  const cfg = oidcConfig(c.env);
  if (!cfg.ok) return apiError(c, cfg.error.code, cfg.error.message);
  if (!cfg.value) return apiError(c, 'not_found', 'sign-in with an identity provider is not configured on this gateway');
  const r = await finishSignIn(c, cfg.value);
  if (!r.ok) return apiError(c, r.error.code, r.error.message, r.error.code === 'unauthenticated' ? 400 : undefined);
  await startSession(c, r.value.identity);
  return c.redirect(r.value.next, 302);
});

authRoutes.get('/session', async (c) => {
  const who = await signedInIdentity(c);
  if (!who.ok) return apiError(c, who.error.code, who.error.message);
  const cfg = oidcConfig(c.env);
  const signIn = cfg.ok && cfg.value ? { signInUrl: '/dashboard/auth/login' } : {};
  if (!who.value) return c.json({ signedIn: false, ...signIn });
  const { identity, csrf } = who.value;
  const teams = (await membershipsOf(c.env, identity.issuer, identity.subject)).map((m) => ({ team: m.team, role: m.role, memberId: m.memberId }));
  return c.json({ signedIn: true, issuer: identity.issuer, subject: identity.subject, email: identity.email, name: identity.name, teams, csrf, ...signIn });
});

authRoutes.post('/logout', async (c) => {
  const who = await signedInIdentity(c);
  if (who.ok && who.value) {
    const form = c.req.header('Content-Type')?.startsWith('application/x-www-form-urlencoded') ? await c.req.parseBody() : {};
    const csrf = crossSiteRefusal(c, who.value, typeof form.csrf === 'string' ? form.csrf : undefined);
    if (csrf) return apiError(c, csrf.code, csrf.message);
  }
  endSession(c);
  return c.json({ signedIn: false });
});
