/**
 * The Worker's side of the bench's trace (src/contracts/trace.ts). Only a Worker built for it
 * traces: `node bench/hotpath.ts --trace` starts `wrangler dev --define GATEHOUSE_TRACE:true`
 * (bench/gateway.ts). Every other build leaves GATEHOUSE_TRACE undefined, so the route has no
 * trace middleware (`traceMark` gives none) and a `stamp` returns at a constant.
 */
import type { MiddlewareHandler } from 'hono';
import { traceLine, type TraceStep } from '../contracts/trace.ts';

/** Replaced at build time by `--define GATEHOUSE_TRACE:true`; a global in no other build. */
declare const GATEHOUSE_TRACE: boolean | undefined;

/** Whether this build traces. */
export const TRACING = typeof GATEHOUSE_TRACE !== 'undefined' && GATEHOUSE_TRACE === true;

/**
 * Prints `step` with the time, in a traced build. `env` is the caller's bindings and is not read:
 * whether a Worker traces is fixed when it is built.
 */
export function stamp(_env: unknown, step: TraceStep): void {
  if (TRACING) console.warn(traceLine(step));
}

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
