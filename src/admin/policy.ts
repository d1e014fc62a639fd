/** Admin: read, replace and dry-run the team policy. */
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import type { AppEnv } from '../env.ts';
import { describeIssues } from '../contracts/errors.ts';
import { PolicyCheckInput } from '../contracts/tools.ts';
import { parsePolicy } from '../policy/engine.ts';
import { dryRun } from '../policy/dry-run.ts';
import { getTeamPolicy, putTeamPolicy } from '../store/policies.ts';
import { policyChanged } from '../dispatch/admission-client.ts';
import { teamRetentionOf, type PolicyDocument } from '../contracts/policy.ts';
import { apiError, readJson } from './http.ts';
import { isPresetName, PRESET_NAMES, PRESETS } from '../policy/presets.ts';
import { auditAdmin } from './audit-action.ts';
import { grantLine } from '../policy/network.ts';

export const policyRoutes = new Hono<AppEnv>();

async function current(c: { env: AppEnv['Bindings'] }, team: string) {
  const t = await getTeamPolicy(c.env, team);
  return { team, version: t.version, updatedAt: t.updatedAt, updatedBy: t.updatedBy, isDefault: t.isDefault, policy: t.policy };
}

/**
 * Saves a policy as the team's next version and tells the team's Durable Object, which admits every
 * request with the current version: only then is the new policy in effect, so an object that did
 * not take it is an error the caller sees (saving again makes a newer version and tells it again).
 */
async function savePolicy(c: Context<AppEnv>, team: string, policy: PolicyDocument, by: string): Promise<{ ok: true } | { ok: false; response: Response }> {
  const stamp = await putTeamPolicy(c.env, team, policy, by);
  try {
    await policyChanged(c.env, team, stamp, teamRetentionOf(policy));
    return { ok: true };
  } catch (e) {
    return {
      ok: false,
      response: apiError(
        c,
        'upstream_error',
        `policy version ${stamp.version} is saved but NOT in effect yet: the team's dispatcher did not take it (${(e as Error).message}); save it again`,
      ),
    };
  }
}

policyRoutes.get('/', async (c) => c.json(await current(c, c.get('principal').team)));

policyRoutes.put('/', async (c) => {
  const p = c.get('principal');
  const body = await readJson(c);
  if (!body.ok) return body.response;
  const parsed = parsePolicy(body.value);
  if (!parsed.ok) return apiError(c, 'invalid_argument', `invalid policy: ${parsed.error.message}`);
  const saved = await savePolicy(c, p.team, parsed.value, p.subject);
  if (!saved.ok) return saved.response;
  const now = await current(c, p.team);
  await auditAdmin(c, 'admin.policy_set', { command: { version: now.version }, ok: true, reason: `policy version ${now.version}` });
  return c.json(now);
});

/** The presets (strict, standard, builds, open) with what each really allows. */
policyRoutes.get('/presets', (c) => c.json({ presets: PRESET_NAMES.map((n) => PRESETS[n]) }));

/** Replaces the team policy with a preset (a new version, like any PUT). */
policyRoutes.put('/presets/:name', async (c) => {
  const p = c.get('principal');
  const name = c.req.param('name');
  if (!isPresetName(name)) return apiError(c, 'not_found', `no preset "${name.slice(0, 40)}"; presets: ${PRESET_NAMES.join(', ')}`);
  const saved = await savePolicy(c, p.team, PRESETS[name].policy, p.subject);
  if (!saved.ok) return saved.response;
  const now = await current(c, p.team);
  await auditAdmin(c, 'admin.policy_set', {
    command: { version: now.version, preset: name },
    ok: true,
    reason: `policy version ${now.version} (preset ${name})`,
  });
  return c.json({ preset: name, ...now });
});

const CheckBody = z.object(PolicyCheckInput).strict();

policyRoutes.post('/check', async (c) => {
  const p = c.get('principal');
  const body = await readJson(c);
  if (!body.ok) return body.response;
  const parsed = CheckBody.safeParse(body.value);
  if (!parsed.success) return apiError(c, 'invalid_argument', describeIssues(parsed.error.issues));
  const { policy, version } = await getTeamPolicy(c.env, p.team);
  const { answer } = await dryRun(policy, parsed.data, p);
  return c.json({
    ...answer,
    ...(answer.network ? { networkLine: grantLine(answer.network) } : {}),
    policyVersion: version,
  });
});
