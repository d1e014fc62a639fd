/**
 * Admin: the team's script library (src/dispatch/script-library.ts in the team's object).
 * `GET /scripts`, `POST /scripts {name, source}`, `GET /scripts/:name[?version=n]` (with source),
 * `GET /scripts/:name/versions`, `DELETE /scripts/:name[?version=n]`. A push or removal leaves an audit row.
 */
import { Hono, type Context } from 'hono';
import type { AppEnv } from '../env.ts';
import { describeIssues } from '../contracts/errors.ts';
import { SCRIPT_NAME_PATTERN, SCRIPT_NAME_RULE, ScriptPush, scriptDigest } from '../contracts/scripts.ts';
import { getScript, listScripts, pushScript, removeScript, scriptVersions, type LibraryAnswer } from '../dispatch/script-library-client.ts';
import { apiError, readJson } from './http.ts';
import { auditAdmin } from './audit-action.ts';

export const scriptRoutes = new Hono<AppEnv>();

const answer = <T>(c: Context<AppEnv>, r: LibraryAnswer<T>, wrap: (v: T) => unknown) => (r.ok ? c.json(wrap(r.value)) : apiError(c, r.code, r.message));

/** The `:name` segment and `?version=`, checked; or the error answer. */
function target(c: Context<AppEnv>, allowed: string[]): { ok: true; name: string; version?: number } | { ok: false; response: Response } {
  const name = c.req.param('name') ?? '';
  if (!SCRIPT_NAME_PATTERN.test(name))
    return { ok: false, response: apiError(c, 'invalid_argument', `script name ${JSON.stringify(name.slice(0, 80))} is not allowed: ${SCRIPT_NAME_RULE}`) };
  const q = new URL(c.req.url).searchParams;
  for (const k of q.keys())
    if (!allowed.includes(k))
      return { ok: false, response: apiError(c, 'invalid_argument', `unknown query parameter "${k.slice(0, 40)}"; allowed: ${allowed.join(', ') || 'none'}`) };
  const v = q.get('version');
  if (v === null) return { ok: true, name };
  if (!/^[1-9]\d{0,8}$/.test(v)) return { ok: false, response: apiError(c, 'invalid_argument', `version must be a positive integer, got "${v.slice(0, 20)}"`) };
  return { ok: true, name, version: Number(v) };
}

scriptRoutes.get('/', async (c) => c.json({ scripts: await listScripts(c.env, c.get('principal').team) }));

scriptRoutes.post('/', async (c) => {
  const body = await readJson(c);
  if (!body.ok) return body.response;
  const parsed = ScriptPush.safeParse(body.value);
  if (!parsed.success) return apiError(c, 'invalid_argument', `invalid script: ${describeIssues(parsed.error.issues)}`);
  const { name, source } = parsed.data;
  const p = c.get('principal');
  const sha256 = await scriptDigest(source);
  const r = await pushScript(c.env, p.team, { name, source, sha256, by: p.subject, now: Date.now() });
  await auditAdmin(c, 'admin.script_push', {
    command: {
      script: name,
      ...(r.ok ? { version: r.value.version.version, created: r.value.created } : {}),
      sha256,
      bytes: new TextEncoder().encode(source).byteLength,
    },
    ok: r.ok,
    reason: r.ok ? undefined : r.message,
  });
  if (!r.ok) return apiError(c, r.code, r.message);
  return c.json(r.value, r.value.created ? 201 : 200);
});

scriptRoutes.get('/:name/versions', async (c) => {
  const t = target(c, []);
  if (!t.ok) return t.response;
  return answer(c, await scriptVersions(c.env, c.get('principal').team, t.name), (versions) => ({ name: t.name, versions }));
});

scriptRoutes.get('/:name', async (c) => {
  const t = target(c, ['version']);
  if (!t.ok) return t.response;
  return answer(c, await getScript(c.env, c.get('principal').team, t.name, t.version), (s) => s);
});

scriptRoutes.delete('/:name', async (c) => {
  const t = target(c, ['version']);
  if (!t.ok) return t.response;
  const r = await removeScript(c.env, c.get('principal').team, t.name, t.version);
  await auditAdmin(c, 'admin.script_remove', {
    command: { script: t.name, ...(t.version !== undefined ? { version: t.version } : {}) },
    ok: r.ok,
    reason: r.ok ? `${r.value.removed} version(s) removed` : r.message,
  });
  return answer(c, r, (v) => ({ name: t.name, ...v }));
});
