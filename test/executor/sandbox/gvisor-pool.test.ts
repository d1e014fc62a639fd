/** How many warm gVisor sandboxes the agent keeps: `--warm`, more while jobs arrive fast (no sandbox is started here). */
import { describe, expect, it } from 'vitest';
import { GvisorDriver } from '../../../executor/sandbox/gvisor.ts';
import { silentLogger } from '../../../executor/log.ts';

describe('gvisor warm pool size', () => {
  const driver = (warm: number) => new GvisorDriver({ root: '/nonexistent', stateDir: '/nonexistent', warm }, silentLogger);

  it('is --warm when jobs arrive slowly, and nothing without --warm', () => {
    const d = driver(4);
    expect(d.poolTarget()).toBe(4);
    d.noteArrival();
    expect(d.poolTarget()).toBe(4);
    const none = driver(0);
    for (let i = 0; i < 50; i++) none.noteArrival();
    expect(none.poolTarget()).toBe(0);
  });

  it('grows with the arrival rate, up to twice --warm, and shrinks back once arrivals stop', () => {
    const d = driver(2);
    const now = Date.now();
    // 10 jobs/s against a ~300 ms start: 3 starts' worth in flight, plus one.
    for (let i = 0; i < 50; i++) d.noteArrival(now - i * 100);
    expect(d.poolTarget(now)).toBe(4);
    const d2 = driver(8);
    for (let i = 0; i < 50; i++) d2.noteArrival(now - i * 100);
    expect(d2.poolTarget(now)).toBe(8);
    expect(d.poolTarget(now + 60_000)).toBe(2);
  });
});
