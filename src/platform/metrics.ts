/**
 * Metrics for operators, in Workers Analytics Engine (the `METRICS` binding, dataset
 * `gatehouse_metrics`): what each data point holds, and the platform's limits on a point. Every
 * point's one index is the team (the sampling key: a busy team never crowds out a quiet one), its
 * first blob names the metric and its second the deployment (the host of GATEHOUSE_ISSUER: staging
 * and production write the same dataset); the columns of each metric are listed in `LAYOUT`, and
 * docs/operations.md ("Metrics") has the SQL an operator runs against them.
 *
 * Writing never fails a call: the binding is optional (unit tests, a deployment without it), a
 * write is fire-and-forget, and `wrangler dev` drops writes locally.
 */
import type { Env } from '../env.ts';

// ---- Workers Analytics Engine: https://developers.cloudflare.com/analytics/analytics-engine/limits/ ----

/** Blobs (strings) one `writeDataPoint` call accepts. */
export const AE_MAX_BLOBS = 20;
/** Doubles (numbers) one `writeDataPoint` call accepts. */
export const AE_MAX_DOUBLES = 20;
/** Indexes one `writeDataPoint` call accepts: exactly one (the sampling key). */
export const AE_MAX_INDEXES = 1;
/** Largest index, in bytes. */
export const AE_INDEX_MAX_BYTES = 96;
/** All blobs of one data point together, in bytes. */
export const AE_BLOBS_MAX_BYTES = 16 * 1024;
/** Data points one Worker (or Durable Object) invocation may write; the platform drops the rest. */
export const AE_POINTS_PER_INVOCATION = 250;

/**
 * Each blob is cut to this many characters (at most 4 bytes each in UTF-8), so the blobs of the
 * widest layout stay far below AE_BLOBS_MAX_BYTES whatever a caller named.
 */
const BLOB_MAX_CHARS = 256;

/**
 * The columns of each metric, in order: `blobs[i]` is the SQL column `blob{i+3}` (blob1 is the
 * metric's name, blob2 the deployment), `doubles[i]` is `double{i+1}`; index1 is the team.
 */
export const LAYOUT = {
  /** One per MCP tool call and admin API call, written by src/edge/call-log.ts. */
  call: {
    blobs: ['surface', 'tool', 'decision', 'stage', 'outcome', 'sandbox', 'agent'],
    doubles: ['latency_ms'],
  },
  /** One per job, when the team's Durable Object ends it (src/dispatch/job-lifecycle.ts). */
  job: {
    blobs: ['state', 'sandbox', 'agent', 'tool', 'error'],
    doubles: ['duration_ms', 'queue_wait_ms'],
  },
  /** The team's object's own counters, at every job it takes in and every job's end. */
  team: {
    blobs: ['at'],
    doubles: ['queued', 'running', 'agents', 'slots'],
  },
} as const;

export type Metric = keyof typeof LAYOUT;
type Blobs<M extends Metric> = Record<(typeof LAYOUT)[M]['blobs'][number], string | null>;
type Doubles<M extends Metric> = Record<(typeof LAYOUT)[M]['doubles'][number], number>;

/** What a writer reads of the Worker's env: the dataset and the deployment's URLs. */
export type MetricsEnv = Pick<Env, 'METRICS' | 'GATEHOUSE_ISSUER' | 'GATEHOUSE_AUDIENCE'>;

/** The dataset as the writers see it: a real binding, or a recording stand-in in a unit test. */
export type MetricsSink = Pick<AnalyticsEngineDataset, 'writeDataPoint'>;

/** Writes one data point of `metric` for `team`, in the metric's column order, within the platform's limits. */
export function writeMetric<M extends Metric>(env: MetricsEnv, metric: M, team: string, blobs: Blobs<M>, doubles: Doubles<M>): void {
  const sink: MetricsSink | undefined = env.METRICS;
  if (!sink) return;
  const layout = LAYOUT[metric];
  const b = blobs as Record<string, string | null>;
  const d = doubles as Record<string, number>;
  try {
    sink.writeDataPoint({
      indexes: [fitBytes(team, AE_INDEX_MAX_BYTES)],
      blobs: [metric, deployment(env), ...layout.blobs.map((k) => (b[k] ?? '').slice(0, BLOB_MAX_CHARS))],
      doubles: layout.doubles.map((k) => (Number.isFinite(d[k]) ? d[k] : 0)),
    });
  } catch (e) {
    // A metric is never worth a failed call (a full invocation budget, a binding gone bad).
    console.warn(`metrics: ${metric} data point not written: ${(e as Error).message}`);
  }
}

const deployments = new WeakMap<object, string>();

/** The deployment's host (from GATEHOUSE_ISSUER, else GATEHOUSE_AUDIENCE), `local` without one; read once per env. */
function deployment(env: Pick<Env, 'GATEHOUSE_ISSUER' | 'GATEHOUSE_AUDIENCE'>): string {
  let d = deployments.get(env);
  if (d === undefined) {
    try {
      d = new URL(env.GATEHOUSE_ISSUER || env.GATEHOUSE_AUDIENCE || '').host.slice(0, BLOB_MAX_CHARS);
    } catch {
      d = 'local';
    }
    deployments.set(env, d);
  }
  return d;
}

/** `s` cut to at most `max` UTF-8 bytes, never inside a character. */
function fitBytes(s: string, max: number): string {
  const bytes = new TextEncoder().encode(s);
  if (bytes.length <= max) return s;
  let out = '';
  let used = 0;
  for (const ch of s) {
    const n = new TextEncoder().encode(ch).length;
    if (used + n > max) break;
    out += ch;
    used += n;
  }
  return out;
}
