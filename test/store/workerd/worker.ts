/**
 * Test-only Worker: exposes the artifact store's functions
 * over HTTP so Node tests can drive them inside workerd. Never deployed.
 * `/put` stores an R2 body and indexes it in D1 the way the gateway did before the index moved to
 * the team's object (a legacy row); the team's object here knows no artifact, so reads fall back to D1.
 */
import type { Env } from '../../../src/env.ts';
import { cleanupLegacyArtifacts, getLegacyArtifactRows, putArtifactBody } from '../../../src/store/artifacts.ts';
import { readTail } from '../../../src/dispatch/artifact-client.ts';
import { queryOutput } from '../../../src/governed/query-output.ts';
import { StreamName } from '../../../src/contracts/agent-protocol.ts';

/** A team object that knows no artifact: every read falls back to D1's legacy rows. */
const noTeamArtifacts = { idFromName: (n: string) => n, get: () => ({ artifactRows: async () => [] }) };

export default {
  async fetch(req: Request, bindings: Env): Promise<Response> {
    const env = { ...bindings, TEAM_DISPATCHER: noTeamArtifacts } as unknown as Env;
    const u = new URL(req.url);
    const p = (k: string) => u.searchParams.get(k) ?? '';
    const now = u.searchParams.has('now') ? Number(p('now')) : undefined;
    switch (u.pathname) {
      case '/healthz':
        return Response.json({ ok: true });
      case '/put': {
        const [team, handle, jobId, stream] = [p('team'), p('handle'), p('job') || 'job-1', StreamName.parse(p('stream') || 'stdout')];
        const lines = Number(p('lines') || 0);
        const r = await putArtifactBody(env, {
          team,
          handle,
          jobId,
          stream,
          body: req.body ?? new ReadableStream({ start: (c) => c.close() }),
          contentLength: Number(p('length')),
          lines,
          truncated: p('truncated') === '1',
        });
        if (!r.ok) return Response.json(r);
        const at = now ?? Date.now();
        await env.DB.prepare(
          `INSERT OR REPLACE INTO artifacts (handle, team, job_id, stream, r2_key, bytes, lines, truncated, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)`,
        )
          .bind(handle, team, jobId, stream, r.value.r2Key, r.value.bytes, lines, at, at + Number(p('hours') || 24) * 3_600_000)
          .run();
        return Response.json({ ok: true, value: { bytes: r.value.bytes } });
      }
      case '/rows':
        return Response.json(await getLegacyArtifactRows(env, p('team'), p('handle'), now));
      case '/tail': {
        const rows = await getLegacyArtifactRows(env, p('team'), p('handle'), now);
        const row = rows.find((r) => r.stream === (p('stream') || 'stdout'));
        return Response.json(row ? { tail: await readTail(env, p('team'), { ...row, place: 'r2' }, Number(p('bytes'))) } : null);
      }
      case '/query':
        return Response.json(await queryOutput(env, p('team'), await req.json(), now));
      case '/cleanup':
        return Response.json(await cleanupLegacyArtifacts(env, Number(p('now'))));
      case '/r2':
        return Response.json({ exists: (await env.ARTIFACTS.head(p('key'))) !== null });
    }
    return new Response('not found', { status: 404 });
  },
} satisfies ExportedHandler<Env>;
