/**
 * Admin: the team's secrets (docs/credentials.md). `PUT /:name` `{ "value": "…" }` sets one, `GET /` lists
 * names and dates (never a value), `DELETE /:name` removes one. Values are sealed in the team's object
 * under GATEHOUSE_SECRETS_KEY; a gateway without that key refuses with a config_error. Every change is audited
 * by name; the value never reaches a log, an audit row or an answer.
 */
import { Hono } from 'hono';
import { describeIssues } from '../contracts/errors.ts';
import { SecretName } from '../contracts/network.ts';
import { SecretPut } from '../contracts/secrets.ts';
import { teamStub } from '../dispatch/client.ts';
import type { AppEnv } from '../env.ts';
import { secretsKey } from '../platform/secret-box.ts';
import { auditAdmin } from './audit-action.ts';
import { apiError, readJson } from './http.ts';

export const secretRoutes = new Hono<AppEnv>();

const badName = (name: string) => {
  const r = SecretName.safeParse(name);
  return r.success ? null : `secret "${name.slice(0, 64)}": ${r.error.issues[0].message}`;
};

secretRoutes.get('/', async (c) => c.json({ secrets: await teamStub(c.env, c.get('principal').team).listSecrets() }));

secretRoutes.put('/:name', async (c) => {
  const name = c.req.param('name');
  const bad = badName(name);
  if (bad) return apiError(c, 'invalid_argument', bad);
  // Refused before the body is read: a gateway that cannot seal never holds a value.
  const key = await secretsKey(c.env);
  if (!key.ok) return apiError(c, key.error.code, key.error.message);
  const body = await readJson(c);
  if (!body.ok) return body.response;
  const parsed = SecretPut.safeParse(body.value);
  // Issues name the path and the rule, never echo the value.
  if (!parsed.success) return apiError(c, 'invalid_argument', describeIssues(parsed.error.issues.map((i) => ({ path: i.path, message: i.message }))));
  const p = c.get('principal');
  const r = await teamStub(c.env, p.team).putSecret(name, parsed.data.value, p.subject);
  if (!r.ok) return apiError(c, r.error.code, r.error.message);
  await auditAdmin(c, 'admin.secret_set', { command: { name }, ok: true, reason: r.value.created ? `secret ${name} created` : `secret ${name} replaced` });
  return c.json({ name, created: r.value.created }, r.value.created ? 201 : 200);
});

secretRoutes.delete('/:name', async (c) => {
  const name = c.req.param('name');
  const bad = badName(name);
  if (bad) return apiError(c, 'invalid_argument', bad);
  const removed = await teamStub(c.env, c.get('principal').team).deleteSecret(name);
  if (!removed) return apiError(c, 'not_found', `the team has no secret "${name}"; list them: gatehouse secrets list`);
  await auditAdmin(c, 'admin.secret_remove', { command: { name }, ok: true, reason: `secret ${name} removed` });
  return c.json({ name, removed: true });
});
