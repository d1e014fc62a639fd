/**
 * The MCP route's marks of the bench's trace (src/contracts/trace.ts, which also holds `stamp`).
 * Only a Worker built for it traces: `node bench/hotpath.ts --trace` starts `wrangler dev --define
 * GATEHOUSE_TRACE:true` (bench/gateway.ts). In every other build the route has no trace middleware.
 */
import type { MiddlewareHandler } from 'hono';
import { stamp, TRACING, type TraceStep } from '../contracts/trace.ts';

/**
 * The route's middleware that stamps `step` as a request passes it: none outside a traced build.
 * At `edge.request` (the route's first) it also stamps the end of the response body.
 */
export function traceMark(step: TraceStep): MiddlewareHandler[] {
  if (!TRACING) return [];
  return [
    async (c, next) => {
      stamp(c.env, step);
      await next();
      if (step === 'edge.request' && c.res.body) {
        const end = new TransformStream<Uint8Array, Uint8Array>({ flush: () => stamp(c.env, 'edge.response_end') });
        c.res = new Response(c.res.body.pipeThrough(end), c.res);
      }
    },
  ];
}
