/**
 * What every tool declares besides its handler, in one place: behaviour hints for clients and
 * the output schema as advertised. A tool file registers with `server.registerTool(name,
 * { title, description, annotations: RUNS_JOBS | READ_ONLY, inputSchema, outputSchema:
 * toolOutput(Shape) }, handler)`.
 */
import { z } from 'zod';
import type { StandardSchemaWithJSON, ToolAnnotations } from '@modelcontextprotocol/server';
import { ToolErrorShape } from '../contracts/tools.ts';

/** Looks things up; changes nothing; asks nothing outside Gatehouse. */
export const READ_ONLY: ToolAnnotations = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false };

/** Runs a program on an executor agent: it may change the workspace and reach whatever the program reaches. */
export const RUNS_JOBS: ToolAnnotations = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };

/** Stops a job: changes state, killing twice is the same as once. */
export const STOPS_JOBS: ToolAnnotations = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false };

/**
 * A tool's output schema as clients see it: the tool's own shape, or an error result carrying
 * `{ error: { code, message } }`. Clients that validate `structuredContent` on error results
 * too (SDK v1 does) therefore accept both; the server checks successful results against the
 * tool's own shape, required fields included.
 */
export function toolOutput<S extends z.ZodRawShape>(shape: S): StandardSchemaWithJSON {
  // A tool whose own result has an `error` field (a job's error) keeps it; a failed call's error fits either way.
  const own = shape.error as z.ZodType | undefined;
  const schema = z.object(shape).extend({ error: own ? z.union([own, ToolErrorShape]) : ToolErrorShape.optional() });
  const std = schema['~standard'];
  const advertised = (json: Record<string, unknown>): Record<string, unknown> => {
    const { required, ...rest } = json as { required?: string[] } & Record<string, unknown>;
    return { ...rest, anyOf: [{ required: required ?? [] }, { required: ['error'] }] };
  };
  return {
    '~standard': {
      ...std,
      jsonSchema: {
        input: (o) => advertised(std.jsonSchema.input(o)),
        output: (o) => advertised(std.jsonSchema.output(o)),
      },
    },
  } as StandardSchemaWithJSON;
}
