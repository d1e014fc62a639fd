/**
 * The team DO's background copy of its job rows into D1 (the team-wide index and the audit
 * log), as one pass over what is not copied yet. A row D1 refuses is skipped for the rest of the
 * pass, so it cannot hold up the rows behind it (the next pass tries it again); a few refusals
 * in a row mean D1 itself is failing, and the pass stops instead of spending the invocation's
 * subrequests on calls that fail the same way (50 per invocation on Workers Free:
 * https://developers.cloudflare.com/workers/platform/limits/). A pass also stops before it spends
 * its share of the invocation's D1 queries; what is left waits for the next pass (the next
 * message, submit or alarm — each its own invocation).
 */
import { D1_QUERIES_PER_INVOCATION, type WorkersPlan } from '../platform/limits.ts';

/** The share of them one copy pass takes: the invocation it runs in makes D1 calls of its own. */
const D1_COPY_QUERY_SHARE = 0.5;

export function copyQueryBudget(plan: WorkersPlan): number {
  return Math.floor(D1_QUERIES_PER_INVOCATION[plan] * D1_COPY_QUERY_SHARE);
}

/** Refusals in a row after which a pass stops (D1 unreachable, not one bad row). */
export const D1_COPY_MAX_FAILURES_IN_A_ROW = 3;
/** Rounds of one pass: each reads a page of pending rows and copies them (a pass copies at most this many pages). */
const D1_COPY_MAX_ROUNDS = 20;

export interface CopyPass<R extends { id: string }> {
  /** The rows still to copy, oldest first (a bounded page). */
  pending(): R[];
  /** Copies one row into D1 and marks it copied; throws when D1 refused it. */
  copy(row: R): Promise<void>;
  /** The D1 queries copying `row` makes (statements in its batch). */
  cost(row: R): number;
  /** The D1 queries this pass may make in all (copyQueryBudget). */
  maxQueries: number;
  onError(row: R, e: unknown): void;
}

/** Runs one pass; returns how many rows were copied, which were refused, and whether it stopped at its query budget with rows left. */
export async function copyPending<R extends { id: string }>(p: CopyPass<R>): Promise<{ copied: number; refused: string[]; budgetLeftRows?: true }> {
  const refused = new Set<string>();
  let copied = 0;
  let inARow = 0;
  let queries = 0;
  for (let round = 0; round < D1_COPY_MAX_ROUNDS; round++) {
    const rows = p.pending().filter((r) => !refused.has(r.id));
    if (rows.length === 0) break;
    for (const row of rows) {
      queries += p.cost(row);
      if (queries > p.maxQueries) return { copied, refused: [...refused], budgetLeftRows: true };
      try {
        await p.copy(row);
        copied += 1;
        inARow = 0;
      } catch (e) {
        refused.add(row.id);
        p.onError(row, e);
        if (++inARow >= D1_COPY_MAX_FAILURES_IN_A_ROW) return { copied, refused: [...refused] };
      }
    }
  }
  return { copied, refused: [...refused] };
}
