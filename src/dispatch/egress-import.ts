/**
 * The egress capability's rows from an older deployment's D1 (the migration tool and the legacy
 * import, through `Egress.import`): its connection log and each job's counts, into its own tables.
 */
import { z } from 'zod';
import type { SqlHost } from './capability-host.ts';

/**
 * Old rows for `import`, as D1 kept them (migrations/0012_egress.sql, `SELECT *`): one row of
 * `egress_connections`, and one of `egress_jobs` (a job's counts); their `id` and `team` columns are ignored.
 */
const EgressConnectionImportRow = z.object({
  job_id: z.string().min(1),
  seq: z.number().int(),
  host: z.string(),
  port: z.number().int(),
  address: z.string().nullable(),
  method: z.string().nullable(),
  decision: z.enum(['allowed', 'refused']),
  reason: z.string(),
  bytes_up: z.number().int(),
  bytes_down: z.number().int(),
  started_at: z.number().int(),
  ms: z.number().int(),
});
const EgressJobImportRow = z.object({ job_id: z.string().min(1), connections: z.number().int(), dropped: z.number().int() });

/**
 * Old rows (D1's `egress_connections` and `egress_jobs`) taken in; a connection already here is left
 * as it is, a job's counts only grow. Malformed rows are counted, not stored.
 */
export function importEgress(
  host: Pick<SqlHost, 'sql' | 'transactionSync'>,
  x: { connections?: readonly unknown[]; jobs?: readonly unknown[] },
): { inserted: number; refused: number } {
  let inserted = 0;
  let refused = 0;
  host.transactionSync(() => {
    for (const raw of x.connections ?? []) {
      const p = EgressConnectionImportRow.safeParse(raw);
      if (!p.success) {
        refused += 1;
        continue;
      }
      const r = p.data;
      const n = host.sql.exec(
        `INSERT OR IGNORE INTO egress_connections (job_id, seq, host, port, address, method, decision, reason, bytes_up, bytes_down, started_at, ms, logged_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        r.job_id,
        r.seq,
        r.host,
        r.port,
        r.address,
        r.method,
        r.decision,
        r.reason,
        r.bytes_up,
        r.bytes_down,
        r.started_at,
        r.ms,
        r.started_at,
      ).rowsWritten;
      if (n > 0) inserted += 1;
    }
    for (const raw of x.jobs ?? []) {
      const p = EgressJobImportRow.safeParse(raw);
      if (!p.success) {
        refused += 1;
        continue;
      }
      host.sql.exec(
        `INSERT INTO egress_counts (job_id, listed, dropped, asks) VALUES (?, ?, ?, 0)
         ON CONFLICT (job_id) DO UPDATE SET listed = MAX(listed, excluded.listed), dropped = MAX(dropped, excluded.dropped)`,
        p.data.job_id,
        p.data.connections,
        p.data.dropped,
      );
      inserted += 1;
    }
  });
  return { inserted, refused };
}
