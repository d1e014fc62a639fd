/**
 * The task rows (D1 `tasks`, the repo's migrations on node:sqlite): a task is found only by its
 * own team and subject, not after its TTL, and a team's expired rows go when it creates the next.
 * The whole flow against wrangler dev is test/e2e/tasks.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { FakeD1 } from '../store/fakes.ts';
import { findTask, saveTask } from '../../src/mcp/tasks/store.ts';
import { TASK_TTL_MS } from '../../src/mcp/tasks/negotiation.ts';
import type { TaskRecord } from '../../src/contracts/tasks.ts';

const T0 = 1_800_000_000_000;
const task = (o: Partial<TaskRecord> = {}): TaskRecord => ({
  team: 'acme',
  taskId: 'job-1',
  subject: 'alice',
  tool: 'execute',
  shaping: { notes: ['n'] },
  createdAt: T0,
  ttlMs: TASK_TTL_MS,
  ...o,
});

describe('task rows', () => {
  it('finds a task for its own team and subject only', async () => {
    const d1 = new FakeD1();
    const db = d1 as unknown as D1Database;
    await saveTask(db, task());
    expect(await findTask(db, 'acme', 'alice', 'job-1', T0 + 1)).toMatchObject({ taskId: 'job-1', tool: 'execute', shaping: { notes: ['n'] } });
    expect(await findTask(db, 'other-team', 'alice', 'job-1', T0 + 1)).toBeNull();
    expect(await findTask(db, 'acme', 'mallory', 'job-1', T0 + 1)).toBeNull();
    expect(await findTask(db, 'acme', 'alice', 'job-2', T0 + 1)).toBeNull();
  });

  it("lives exactly its TTL (7 days, as long as the team DO keeps the job), and expired rows go with the team's next task", async () => {
    const d1 = new FakeD1();
    const db = d1 as unknown as D1Database;
    expect(TASK_TTL_MS).toBe(7 * 24 * 3600_000);
    await saveTask(db, task());
    await saveTask(db, task({ team: 'other-team' }));
    expect(await findTask(db, 'acme', 'alice', 'job-1', T0 + TASK_TTL_MS)).not.toBeNull();
    expect(await findTask(db, 'acme', 'alice', 'job-1', T0 + TASK_TTL_MS + 1)).toBeNull();
    await saveTask(db, task({ taskId: 'job-2', createdAt: T0 + TASK_TTL_MS + 1 }));
    const left = d1.rows('SELECT team, task_id FROM tasks ORDER BY team, task_id');
    expect(left).toEqual([
      { team: 'acme', task_id: 'job-2' },
      { team: 'other-team', task_id: 'job-1' },
    ]);
  });
});
