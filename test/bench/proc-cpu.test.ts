/**
 * The bench's CPU accounting (bench/proc-cpu.ts) on real processes: a tree's CPU keeps what its
 * processes spent after they ended (their parent's cutime/cstime), so a job's short-lived processes count.
 */
import { spawn, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { descendants, procSnapshot } from '../../bench/proc-cpu.ts';
import { previousFigure } from '../../bench/previous.ts';

/** CPU (ms) of the tree under `root`: its live processes' own and reaped children's time. */
const treeCpu = (root: number) => descendants(procSnapshot(), root).reduce((a, p) => a + p.own + p.reaped, 0);

describe('process tree CPU', () => {
  it("counts a child's CPU after the child has ended and was reaped", () => {
    const before = treeCpu(process.pid);
    // A child that spends ~300 ms of CPU (busy loop by CPU time, not wall time) and exits.
    const r = spawnSync(process.execPath, ['-e', 'const t=process.cpuUsage();while(process.cpuUsage(t).user<300000){}'], { stdio: 'ignore' });
    expect(r.status).toBe(0);
    expect(treeCpu(process.pid) - before).toBeGreaterThanOrEqual(250);
  });

  it('finds a live grandchild under its root', async () => {
    const child = spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore' });
    try {
      let found = false;
      for (let i = 0; i < 100 && !found; i++) {
        found = descendants(procSnapshot(), process.pid).some((p) => p.comm === 'sleep');
        if (!found) await new Promise((res) => setTimeout(res, 50));
      }
      expect(found).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('previous figures', () => {
  it('reads the newest figure of a row of bench/RESULTS.md by its label, and null for an unknown label', () => {
    const prev = previousFigure(['CPU/job, none: agent (Node, its own process)']);
    expect(prev?.value).toBeTypeOf('number');
    expect(previousFigure(['no such row'])).toBeNull();
  });
});
