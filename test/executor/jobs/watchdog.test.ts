/**
 * The shared watchdog process: one per agent, armed per job. Its kill command here writes a
 * marker file, so each rule is seen from outside the agent: a deadline fires, a disarmed job is
 * left alone, a watchdog process that dies is replaced with every armed job re-armed, and an
 * agent that dies (SIGKILL, no chance to clean up) gets every armed job killed at once.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startWatchdog, type WatchdogReport } from '../../../executor/jobs/watchdog.ts';

const ENV = { PATH: '/usr/bin:/bin' };
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-watchdog-'));
const marker = (name: string) => join(dir, name);
const touch = (name: string) => ['/bin/sh', '-c', 'echo fired > "$1"', 'sh', marker(name)];

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return cond();
}

/** Our watchdog processes (`node …/watchdog-process.ts`): children of this process. */
function watchdogPids(): number[] {
  return execFileSync('ps', ['-eo', 'pid=,ppid=,args='], { encoding: 'utf8' })
    .split('\n')
    .map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && Number(m[2]) === process.pid && m[3].includes('watchdog-process'))
    .map((m) => Number(m[1]));
}

describe('shared watchdog process', () => {
  it('runs the kill command at the deadline', async () => {
    startWatchdog(300, touch('deadline'), ENV);
    expect(await until(() => existsSync(marker('deadline')), 10_000)).toBe(true);
  });

  it('leaves a disarmed job alone', async () => {
    const w = startWatchdog(400, touch('disarmed'), ENV);
    w.disarm();
    startWatchdog(800, touch('later'), ENV); // proves the watchdog still works after the disarm
    expect(await until(() => existsSync(marker('later')), 10_000)).toBe(true);
    expect(existsSync(marker('disarmed'))).toBe(false);
  });

  it('says when it fired and how the kill command ended, also when it failed or could not start', async () => {
    const heard: WatchdogReport[] = [];
    startWatchdog(200, touch('reported'), ENV, (r) => heard.push(r));
    startWatchdog(200, ['/bin/sh', '-c', 'echo cannot kill that >&2; exit 3'], ENV, (r) => heard.push(r));
    startWatchdog(200, ['/nonexistent/runsc', 'kill'], ENV, (r) => heard.push(r));
    const quiet = startWatchdog(60_000, touch('never'), ENV, (r) => heard.push(r));
    quiet.disarm();
    expect(await until(() => heard.length >= 3, 15_000)).toBe(true);
    await new Promise((r) => setTimeout(r, 300));
    expect(heard).toHaveLength(3);
    const ok = heard.find((r) => r.code === 0)!;
    expect(Date.parse(ok.at)).toBeGreaterThan(Date.now() - 60_000);
    expect(ok.ms).toBeGreaterThanOrEqual(0);
    // A failed kill is tried again (three times in all) before the watchdog gives up and says so.
    expect(heard.find((r) => r.code === 3)).toMatchObject({ attempts: 3, stderr: expect.stringContaining('cannot kill that') });
    expect(ok.attempts).toBe(1);
    expect(heard.find((r) => r.error !== undefined)?.error).toContain('ENOENT');
    expect(existsSync(marker('never'))).toBe(false);
  });

  it('a watchdog process that dies is replaced, and the armed jobs keep their deadlines', async () => {
    startWatchdog(2_500, touch('rearmed'), ENV);
    const [pid] = watchdogPids();
    expect(pid).toBeGreaterThan(0);
    process.kill(pid, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    // The next job starts a new watchdog process, which re-arms the first job too.
    startWatchdog(60_000, touch('unrelated'), ENV).disarm();
    expect(await until(() => existsSync(marker('rearmed')), 15_000)).toBe(true);
    expect(watchdogPids().some((p) => p !== pid)).toBe(true);
  });

  it('an agent killed with SIGKILL gets every armed job killed at once', async () => {
    // A stand-in agent: arms two long deadlines, then is killed before either.
    const script = `
      import { startWatchdog } from ${JSON.stringify(resolve(import.meta.dirname, '../../../executor/jobs/watchdog.ts'))};
      startWatchdog(600_000, ${JSON.stringify(touch('agent-died-1'))}, ${JSON.stringify(ENV)});
      startWatchdog(600_000, ${JSON.stringify(touch('agent-died-2'))}, ${JSON.stringify(ENV)});
      console.log('armed');
      setInterval(() => {}, 1000);
    `;
    const agent = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((r) => agent.stdout!.on('data', (d) => String(d).includes('armed') && r()));
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(marker('agent-died-1'))).toBe(false);
    agent.kill('SIGKILL');
    expect(await until(() => existsSync(marker('agent-died-1')) && existsSync(marker('agent-died-2')), 10_000)).toBe(true);
  });
});
