/**
 * What the TeamDispatcher streams back to the Worker for one job (NDJSON, one event per line),
 * and the request that starts it. Defined once here; the DO writes them, the MCP tools read them.
 */
import { z } from 'zod';
import { JobExit, JobSpec, StreamName } from '../contracts/agent-protocol.ts';

export const DispatchRequest = z.object({
  spec: JobSpec,
  /** Identifies the MCP call so `notifications/cancelled` (another HTTP request) can find the job. */
  cancelKey: z.string().min(1),
  /** Runtime the job needs on the agent (code mode / runtime_execute), if any. */
  runtime: z.string().optional(),
  tool: z.string(),
  subject: z.string(),
  maxConcurrentJobs: z.number().int().positive(),
  queueWaitMs: z.number().int().min(0),
});
export type DispatchRequest = z.infer<typeof DispatchRequest>;

export const DispatchEvent = z.discriminatedUnion('type', [
  z.object({ type: z.literal('queued'), position: z.number().int() }),
  z.object({ type: z.literal('started'), agentId: z.string() }),
  z.object({ type: z.literal('output'), stream: StreamName, data: z.string() }),
  z.object({ type: z.literal('exit'), exit: JobExit, agentId: z.string() }),
  z.object({ type: z.literal('error'), code: z.string(), message: z.string() }),
]);
export type DispatchEvent = z.infer<typeof DispatchEvent>;

/** Internal DO paths (the DO is only reachable through the Worker's stub). */
export const DO_PATHS = { connect: '/connect', run: '/run', cancel: '/cancel', agents: '/agents' } as const;

export interface AgentView {
  agentId: string;
  version: string;
  sandbox: string;
  capacity: number;
  running: number;
  runtimes: { name: string; executable: string; path: string; version: string }[];
  connectedAt: number;
  lastSeen: number;
}
