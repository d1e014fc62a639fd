/**
 * Test-only Worker: exposes the artifact store's functions (and the job/audit rows' D1 writes)
 * over HTTP so Node tests can drive them inside workerd. Never deployed.
 */
import type { Env } from '../../../src/env.ts';
import { cleanupExpiredArtifacts, getArtifactRows, putArtifact, readTail } from '../../../src/store/artifacts.ts';
import { queryOutput } from '../../../src/mcp/query-output.ts';
import { StreamName } from '../../../src/contracts/agent-protocol.ts';
import { syncJobToD1 } from '../../../src/store/jobs.ts';
import { writeAudit } from '../../../src/store/audit.ts';

export default {
  async fetch(req: Request, env: Env): Promise<Response> {
    const u = new URL(req.url);
    const p = (k: string) => u.searchParams.get(k) ?? '';
    const now = u.searchParams.has('now') ? Number(p('now')) : undefined;
    switch (u.pathname) {
      case '/healthz':
        return Response.json({ ok: true });
      case '/put':
        return Response.json(
          await putArtifact(env, {
            team: p('team'),
            handle: p('handle'),
            jobId: p('job') || 'job-1',
            stream: StreamName.parse(p('stream') || 'stdout'),
            body: req.body ?? new ReadableStream({ start: (c) => c.close() }),
            contentLength: Number(p('length')),
            lines: Number(p('lines') || 0),
            truncated: p('truncated') === '1',
            retentionHours: Number(p('hours') || 24),
            now,
          }),
        );
      case '/rows':
        return Response.json(await getArtifactRows(env, p('team'), p('handle'), now));
      case '/tail': {
        const rows = await getArtifactRows(env, p('team'), p('handle'), now);
        const row = rows.find((r) => r.stream === (p('stream') || 'stdout'));
        return Response.json(row ? { tail: await readTail(env, row, Number(p('bytes'))) } : null);
      }
      case '/query':
        return Response.json(await queryOutput(env, p('team'), await req.json(), now));
      case '/cleanup':
        return Response.json(await cleanupExpiredArtifacts(env, Number(p('now'))));
      case '/job-sync': {
        // The team DO's background copy of one job (src/dispatch/team-dispatcher.ts `sync`).
        type Sync = Parameters<typeof syncJobToD1>;
        const b = (await req.json()) as { team: Sync[1]; view: Sync[2]; ref: Sync[3]; create: Sync[4] };
        await syncJobToD1(env.DB, b.team, b.view, b.ref, b.create);
        return Response.json({ ok: true });
      }
      case '/audit-write':
        return Response.json({ id: await writeAudit(env.DB, await req.json()) });
      case '/d1':
        // Both D1 rows of a job, as admins and the dashboard read them.
        return Response.json({
          audit: (
            await env.DB.prepare(`SELECT tool, decision, reason, job_id, exit_status, at, command FROM audit WHERE team = ? AND job_id = ? ORDER BY id`)
              .bind(p('team'), p('job'))
              .all()
          ).results,
          jobs: (await env.DB.prepare(`SELECT id, state, tool, subject, spec, exit_code FROM jobs WHERE team = ? AND id = ?`).bind(p('team'), p('job')).all())
            .results,
        });
      case '/r2':
        return Response.json({ exists: (await env.ARTIFACTS.head(p('key'))) !== null });
    }
    return new Response('not found', { status: 404 });
  },
} satisfies ExportedHandler<Env>;
