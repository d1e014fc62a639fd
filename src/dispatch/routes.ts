/**
 * Routes executor agents use (mounted at /agent/v1): the WebSocket to the team's
 * TeamDispatcher and the artifact upload. Both take an `agent`-scoped token; the team comes
 * from the token, never from the request.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { requireAuth } from '../auth/index.ts';
import { StreamName } from '../contracts/agent-protocol.ts';
import { beginUpload, connectAgent, endUpload } from './client.ts';
import { putArtifact } from '../store/artifacts.ts';
import { getTeamPolicy } from '../store/policies.ts';

export const agentRoutes = new Hono<AppEnv>();

agentRoutes.use('*', requireAuth({ scopes: ['agent'] }));

agentRoutes.get('/connect', async (c) => {
  if (c.req.header('Upgrade')?.toLowerCase() !== 'websocket') {
    return c.json({ error: { code: 'invalid_argument', message: 'this endpoint takes a WebSocket upgrade (executor agents only)' } }, 426);
  }
  const p = c.get('principal');
  return connectAgent(c.env, p.team, { subject: p.subject, tokenId: p.tokenId });
});

const HANDLE = /^[A-Za-z0-9_-]{8,200}$/;

agentRoutes.put('/artifacts/:handle/:stream', async (c) => {
  const p = c.get('principal');
  const { handle, stream } = c.req.param();
  const s = StreamName.safeParse(stream);
  if (!s.success) return c.json({ error: { code: 'invalid_argument', message: `stream must be stdout or stderr, got "${stream}"` } }, 400);
  if (!HANDLE.test(handle)) return c.json({ error: { code: 'invalid_argument', message: 'malformed artifact handle' } }, 400);
  const lengthHeader = c.req.header('Content-Length');
  const contentLength = Number(lengthHeader);
  if (!lengthHeader || !Number.isSafeInteger(contentLength) || contentLength < 0) {
    return c.json({ error: { code: 'invalid_argument', message: 'Content-Length is required (artifact uploads are not chunked)' } }, 411);
  }
  const jobId = c.req.header('X-Gatehouse-Job') ?? '';
  const lines = Number(c.req.header('X-Gatehouse-Lines') ?? '0');
  const { policy } = await getTeamPolicy(c.env, p.team);
  if (contentLength > policy.limits.maxArtifactBytes) {
    return c.json({ error: { code: 'payload_too_large', message: `artifact of ${contentLength} bytes exceeds the team's maxArtifactBytes (${policy.limits.maxArtifactBytes})` } }, 413);
  }
  // Only the agent the job runs on, only while it is open, only once per stream. Another team's
  // handle, another agent's job or a made-up one: "not found", never "forbidden".
  if (!jobId) return c.json({ error: { code: 'invalid_argument', message: 'X-Gatehouse-Job is required' } }, 400);
  const may = await beginUpload(c.env, p.team, { jobId, handle, stream: s.data, subject: p.subject });
  if (!may.ok) return c.json({ error: { code: may.code, message: may.message } }, may.status);
  const r = await putArtifact(c.env, {
    team: p.team, handle, jobId, stream: s.data, body: c.req.raw.body ?? new ReadableStream({ start: (ctl) => ctl.close() }),
    contentLength, lines: Number.isFinite(lines) && lines >= 0 ? Math.floor(lines) : 0,
    truncated: c.req.header('X-Gatehouse-Truncated') === '1', retentionHours: policy.artifacts.retentionHours,
  });
  await endUpload(c.env, p.team, jobId, s.data, r.ok, r.ok ? r.value.bytes : 0);
  if (!r.ok) return c.json({ error: r.error }, r.error.code === 'invalid_argument' ? 400 : 500);
  return c.json({ handle, stream: s.data, bytes: r.value.bytes }, 201);
});
