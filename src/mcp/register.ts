/**
 * What every tool declares besides its handler, in one place: behaviour hints for clients, the
 * output schema as advertised, and what one call may cost. A tool file registers with
 * `server.registerTool(name, { title, description, annotations: RUNS_JOBS | READ_ONLY, inputSchema,
 * outputSchema: toolOutput(Shape) }, handler)` and exports its `ToolCost` beside it.
 */
import { z } from 'zod';
import type { StandardSchemaWithJSON, ToolAnnotations } from '@modelcontextprotocol/server';
import { ToolErrorShape } from '../contracts/tools.ts';

/**
 * What one call of a tool may cost in subrequests, worst case on its code path: a JSON-RPC batch whose
 * calls together could pass the plan's limit is refused up front (src/mcp/bounds.ts). A tool that
 * decides policy (`decidesPolicy`) costs one more fetch per remote OPA evaluator. If you add a D1, R2,
 * Durable Object or fetch call to a tool's path, raise its number.
 */
export interface ToolCost {
  subrequests: number;
  decidesPolicy: boolean;
}

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
  // Built once per shape per isolate: the server is built per request, its schemas are not.
  const known = outputs.get(shape);
  if (known) return known;
  // A tool whose own result has an `error` field (a job's error) keeps it; a failed call's error fits either way.
  const own = shape.error as z.ZodType | undefined;
  const schema = z.object(shape).extend({ error: own ? z.union([own, ToolErrorShape]) : ToolErrorShape.optional() });
  const std = schema['~standard'];
  const advertised = (json: Record<string, unknown>): Record<string, unknown> => {
    const { required, ...rest } = json as { required?: string[] } & Record<string, unknown>;
    return { ...rest, anyOf: [{ required: required ?? [] }, { required: ['error'] }] };
  };
  const out = {
    '~standard': {
      ...std,
      jsonSchema: {
        input: once((o) => advertised(std.jsonSchema.input(o))),
        output: once((o) => advertised(std.jsonSchema.output(o))),
      },
    },
  } as StandardSchemaWithJSON;
  outputs.set(shape, out);
  return out;
}

const outputs = new WeakMap<z.ZodRawShape, StandardSchemaWithJSON>();

type JsonSchemaOf = StandardSchemaWithJSON['~standard']['jsonSchema']['input'];

/**
 * Converts a schema to JSON Schema once per isolate and target instead of once per request (the
 * SDK converts on every tools/list, and on every tools/call for the output schema and, in the
 * 2026 era, the input schema). The result is frozen: every request shares it, so none may change it.
 */
function once(convert: JsonSchemaOf): JsonSchemaOf {
  const byTarget = new Map<string, Record<string, unknown>>();
  return (o) => {
    const key = String(o?.target ?? '');
    let json = byTarget.get(key);
    if (!json) {
      json = deepFreeze(convert(o));
      byTarget.set(key, json);
    }
    return json;
  };
}

/**
 * A tool's input schema with its JSON Schema conversion cached (see `once`). Idempotent, so
 * the per-request server can pass every tool's input schema through it.
 */
export function cachedInput<T>(schema: T): T {
  const s = schema as unknown as StandardSchemaWithJSON;
  const std = s?.['~standard'];
  if (!std?.jsonSchema || inputs.has(s)) return schema;
  inputs.add(s);
  // zod keeps `~standard` settable per instance (it is a prototype getter with a setter).
  (s as { '~standard': unknown })['~standard'] = { ...std, jsonSchema: { input: once(std.jsonSchema.input), output: once(std.jsonSchema.output) } };
  return schema;
}

const inputs = new WeakSet<object>();

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}
