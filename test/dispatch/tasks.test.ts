/**
 * The team's MCP tasks (src/dispatch/tasks.ts) over node:sqlite: a task is found only by the subject
 * that created it, not after its TTL, and the alarm drops it then; old D1 rows are taken in once.
 * The whole flow against wrangler dev is test/e2e/tasks.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { Tasks, type TeamTask } from '../../src/dispatch/tasks.ts';
import { TASK_TTL_MS } from '../../src/mcp/tasks/negotiation.ts';
import { sqlHost } from './sql-host.ts';

const T0 = 1_800_000_000_000;
const task = (o: Partial<TeamTask> = {}): TeamTask => ({
  taskId: 'job-1',
  subject: 'alice',
  tool: 'execute',
  shaping: { notes: ['n'] },
  createdAt: T0,
  ttlMs: TASK_TTL_MS,
  ...o,
});

describe('tasks', () => {
  it('finds a task for the subject that created it only', () => {
    const tasks = new Tasks(sqlHost());
    tasks.save(task());
    expect(tasks.find('alice', 'job-1', T0 + 1)).toEqual(task());
    expect(tasks.find('mallory', 'job-1', T0 + 1)).toBeNull();
    expect(tasks.find('alice', 'job-2', T0 + 1)).toBeNull();
  });

  it('lives exactly its TTL (7 days, as long as the object keeps the job); the alarm drops it then', () => {
    const host = sqlHost();
    const tasks = new Tasks(host);
    expect(TASK_TTL_MS).toBe(7 * 24 * 3600_000);
    expect(tasks.nextWake(T0)).toBeNull();
    tasks.save(task());
    tasks.save(task({ taskId: 'job-2', createdAt: T0 + 10 }));
    expect(tasks.find('alice', 'job-1', T0 + TASK_TTL_MS)).not.toBeNull();
    expect(tasks.find('alice', 'job-1', T0 + TASK_TTL_MS + 1)).toBeNull();
    expect(tasks.nextWake(T0)).toBe(T0 + TASK_TTL_MS + 1);
    tasks.onAlarm(T0 + TASK_TTL_MS + 1);
    expect(host.db.prepare('SELECT task_id FROM tasks').all()).toEqual([{ task_id: 'job-2' }]);
    expect(tasks.nextWake(T0)).toBe(T0 + 10 + TASK_TTL_MS + 1);
  });

  it('takes in D1 rows once (their team column ignored) and counts malformed ones', () => {
    const tasks = new Tasks(sqlHost());
    const row = { team: 'acme', task_id: 'job-7', subject: 'bob', tool: 'runtime_execute', shaping: '{"outputMode":"summary"}', created_at: T0, ttl_ms: 1000 };
    expect(tasks.import([row, { ...row, task_id: 42 }])).toEqual({ inserted: 1, refused: 1 });
    expect(tasks.import([{ ...row, subject: 'mallory' }])).toEqual({ inserted: 0, refused: 0 });
    expect(tasks.find('bob', 'job-7', T0)).toEqual({
      taskId: 'job-7',
      subject: 'bob',
      tool: 'runtime_execute',
      shaping: { outputMode: 'summary' },
      createdAt: T0,
      ttlMs: 1000,
    });
  });
});
