/**
 * Routes executor agents use (mounted at /agent/v1): the WebSocket to the team's
 * TeamDispatcher and the artifact uploads (one PUT, or in parts: `artifact-routes.ts`). Both take an `agent`-scoped token; the team comes
 * from the token, never from the request.
 */
import { Hono } from 'hono';
import type { AppEnv } from '../env.ts';
import { requireAuth } from '../auth/index.ts';
import { connectAgent } from './client.ts';
import { abortMultipart, completeMultipart, putPart, putSearchIndex, putWhole, startMultipart } from './artifact-routes.ts';

export const agentRoutes = new Hono<AppEnv>();

agentRoutes.use('*', requireAuth({ scopes: ['agent'] }));

agentRoutes.get('/connect', async (c) => {
  if (c.req.header('Upgrade')?.toLowerCase() !== 'websocket') {
    return c.json({ error: { code: 'invalid_argument', message: 'this endpoint takes a WebSocket upgrade (executor agents only)' } }, 426);
  }
  const p = c.get('principal');
  return connectAgent(c.env, p.team, { subject: p.subject, tokenId: p.tokenId, agentGrant: p.agentGrant });
});

agentRoutes.put('/artifacts/:handle/:stream', putWhole);
agentRoutes.put('/artifacts/:handle/:stream/index', putSearchIndex);
agentRoutes.post('/artifacts/:handle/:stream/multipart', startMultipart);
agentRoutes.put('/artifacts/:handle/:stream/multipart/:part', putPart);
agentRoutes.post('/artifacts/:handle/:stream/multipart/complete', completeMultipart);
agentRoutes.delete('/artifacts/:handle/:stream/multipart', abortMultipart);
