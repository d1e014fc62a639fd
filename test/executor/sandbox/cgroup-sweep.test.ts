/**
 * An agent killed without cleaning up (SIGKILL, OOM, power loss) leaves its jobs' cgroups —
 * and any job still running in one. The same agent started again (same state dir) removes
 * them and kills what is left in them; another live agent's cgroups and jobs are untouched.
 * The "killed" agent here is a driver + runner that is simply abandoned mid-job: from the
 * cgroups' point of view that is exactly what a SIGKILL leaves.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cgroupOwner, cgroupSupport } from '../../../executor/sandbox/cgroup.ts';
import { startDriver } from '../../../executor/sandbox/index.ts';
import type { Logger } from '../../../executor/log.ts';
import { makeRig, type Rig } from '../helpers.ts';

const cgroups = cgroupSupport();
if (!cgroups && process.env.CI === 'true') throw new Error('cgroups are required under CI=true (the agent runs as root there)');
if (!cgroups) console.warn('skipping the stale-cgroup sweep: this process cannot create cgroups (not root?); allowed outside CI only');

const PARENT = cgroups === 'v2' ? '/sys/fs/cgroup/gatehouse' : '/sys/fs/cgroup/memory/gatehouse';
/** The job cgroups of the agent whose state dir is `stateDir`. */
const cgroupsOf = (stateDir: string) => readdirSync(PARENT).filter((n) => n.startsWith(`nb-${cgroupOwner(stateDir)}-`));
const procsOf = (id: string) =>
  readFileSync(join(PARENT, id, 'cgroup.procs'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map(Number);
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) if (cond()) return true;
  return cond();
}

describe.runIf(cgroups !== null)('stale job cgroups of a killed agent', () => {
  const rigs: Rig[] = [];
  afterAll(async () => {
    await Promise.all(rigs.map((r) => r.close()));
  });

  it("are removed when the same agent starts again, with the job left in them; another agent's are not touched", async () => {
    const killed = await makeRig('none');
    const other = await makeRig('none');
    rigs.push(killed, other);
    void killed.run({ mode: 'shell', command: 'sleep 600', timeoutMs: 60_000 });
    void other.run({ mode: 'shell', command: 'sleep 600', timeoutMs: 60_000 });
    expect(
      await until(
        () => cgroupsOf(killed.stateDir).some((id) => procsOf(id).length > 0) && cgroupsOf(other.stateDir).some((id) => procsOf(id).length > 0),
        20_000,
      ),
    ).toBe(true);
    const [staleId] = cgroupsOf(killed.stateDir);
    const stalePids = procsOf(staleId);
    const [otherId] = cgroupsOf(other.stateDir);
    const otherPids = procsOf(otherId);

    // The killed agent is never told anything; it starts again with the same state dir.
    const said: string[] = [];
    const log: Logger = { info: () => {}, warn: (m) => said.push(m), error: (m) => said.push(m) };
    const again = await startDriver('none', { root: killed.root, stateDir: killed.stateDir, warm: 0 }, log);
    expect(again.ok).toBe(true);
    try {
      expect(existsSync(join(PARENT, staleId)), 'the stale cgroup').toBe(false);
      expect(await until(() => stalePids.every((p) => !alive(p)), 10_000), 'the job left in it').toBe(true);
      expect(
        said.some((m) => /removed 1 job cgroups left by an earlier run of this agent/.test(m)),
        said.join('\n'),
      ).toBe(true);
      expect(existsSync(join(PARENT, otherId)), "the other agent's cgroup").toBe(true);
      expect(procsOf(otherId)).toEqual(otherPids);
      expect(otherPids.every(alive), "the other agent's job").toBe(true);
    } finally {
      if (again.ok) await again.value.close();
    }
  }, 90_000);
});
