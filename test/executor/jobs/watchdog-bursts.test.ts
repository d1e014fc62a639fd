/**
 * The watchdog process reads its stdin in bursts (one wake-up per pause, not per line): a deadline
 * armed while it is not reading must still fire when it is due, not that long after the line is
 * read. The pause is stretched to 4 s here (GATEHOUSE_WATCHDOG_READ_PAUSE_MS) so the difference is
 * seconds, not milliseconds; its own file, so its watchdog process is not the other tests'.
 */
import { describe, expect, it } from 'vitest';
import { startWatchdog, type WatchdogReport } from '../../../executor/jobs/watchdog.ts';

const PAUSE_MS = 4000;
const ENV = { PATH: '/usr/bin:/bin', GATEHOUSE_WATCHDOG_READ_PAUSE_MS: String(PAUSE_MS) };

describe('watchdog reading in bursts', () => {
  it('fires a deadline armed between two reads when it is due, not a full deadline after the read', async () => {
    const t0 = Date.now();
    // Starts the watchdog process; its first read then leaves stdin alone for PAUSE_MS.
    startWatchdog(600_000, ['/bin/true'], ENV).disarm();
    await new Promise((r) => setTimeout(r, 1000));
    const heard: WatchdogReport[] = [];
    // Due 4 s after t0: about when the watchdog reads again. Counted from that read instead, it would fire ~3 s later.
    startWatchdog(3000, ['/bin/true'], ENV, (r) => heard.push(r));
    const deadline = Date.now() + 15_000;
    while (!heard.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(heard).toHaveLength(1);
    expect(heard[0].code).toBe(0);
    const firedAfter = Date.parse(heard[0].at) - t0;
    // Read at PAUSE_MS after the watchdog started (its start: under 1.5 s even on a loaded host), the due time already past.
    expect(firedAfter).toBeGreaterThanOrEqual(3900);
    expect(firedAfter).toBeLessThan(PAUSE_MS + 1500 + 500);
  }, 30_000);
});
