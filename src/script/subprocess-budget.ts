/**
 * A script's subprocess caps, `script.subprocess.maxCount` and `maxTotalMs`, for subprocesses that
 * run at once (`Promise.all` of `gatehouse.exec` calls) as well as one after another. A subprocess
 * reserves its time before it starts and settles what it really took when it ends, so the time
 * already used plus the time promised to running subprocesses never passes the cap.
 *
 * A subprocess asks for the timeout it would get (its `timeoutMs`, else the policy's default) and is
 * granted that or what is left unreserved, whichever is less: the grant is its timeout. With no time
 * left, or the count reached, it is refused with a message naming the cap and what is left. What it
 * settles is its wall time through the whole governed path (policy, dispatch, the process, the
 * artifact), so the total may pass the cap by that path's own time around each process: a job's
 * timeout bounds only the process.
 *
 * Pure accounting (no clock, no I/O): the caller measures the time.
 *
 * ```ts
 * const r = budget.reserve(30_000);            // { ok: true, grant: { ordinal: 1, timeoutMs: 2000, limited: true } } under maxTotalMs 2000
 * if (r.ok) budget.settle(r.grant, elapsedMs); // after the subprocess ended
 * ```
 */

export interface SubprocessCaps {
  maxCount: number;
  maxTotalMs: number;
}

export interface Grant {
  /** Unique per reservation. */
  readonly id: number;
  /** The subprocess's number within the script (`#3` in progress messages). */
  readonly ordinal: number;
  /** Its timeout: what it asked for, or less when less was left. */
  readonly timeoutMs: number;
  /** Whether less than it asked for was left. */
  readonly limited: boolean;
}

export type Reservation = { ok: true; grant: Grant } | { ok: false; message: string };

export class SubprocessBudget {
  readonly #caps: SubprocessCaps;
  #started = 0;
  #settledMs = 0;
  #nextId = 1;
  /** Time held by the subprocesses still running, by grant id. */
  readonly #held = new Map<number, number>();

  constructor(caps: SubprocessCaps) {
    this.#caps = caps;
  }

  /** Subprocesses started (running or ended). */
  get started(): number {
    return this.#started;
  }

  /** Wall time of the subprocesses that have ended, added together. */
  get totalMs(): number {
    return this.#settledMs;
  }

  get running(): number {
    return this.#held.size;
  }

  /** Time neither used nor held by a running subprocess. */
  get leftMs(): number {
    return Math.max(0, this.#caps.maxTotalMs - this.#settledMs - this.#heldMs());
  }

  #heldMs(): number {
    let held = 0;
    for (const ms of this.#held.values()) held += ms;
    return held;
  }

  /** Reserves a subprocess that would run for up to `wantMs`. */
  reserve(wantMs: number): Reservation {
    const { maxCount, maxTotalMs } = this.#caps;
    if (this.#started >= maxCount) {
      return { ok: false, message: `subprocess: limit reached — a script may start at most ${maxCount} subprocesses (script.subprocess.maxCount)` };
    }
    const left = this.leftMs;
    if (left < 1) {
      if (this.#held.size === 0) {
        return {
          ok: false,
          message: `subprocess: limit reached — this script's subprocesses already ran ${this.#settledMs} ms of the ${maxTotalMs} ms allowed (script.subprocess.maxTotalMs)`,
        };
      }
      return {
        ok: false,
        message:
          `subprocess: limit reached — this script's subprocesses already ran ${this.#settledMs} ms and the ${this.#held.size} still running hold ${this.#heldMs()} ms ` +
          `of the ${maxTotalMs} ms allowed (script.subprocess.maxTotalMs), so no time is left; give subprocesses that run at once a smaller timeoutMs`,
      };
    }
    const timeoutMs = Math.max(1, Math.floor(Math.min(wantMs, left)));
    this.#started += 1;
    const grant: Grant = { id: this.#nextId++, ordinal: this.#started, timeoutMs, limited: timeoutMs < wantMs };
    this.#held.set(grant.id, timeoutMs);
    return { ok: true, grant };
  }

  /** Gives a grant back unused: the subprocess was refused before it started, so it does not count. */
  release(grant: Grant): void {
    if (this.#held.delete(grant.id)) this.#started -= 1;
  }

  /** The subprocess ended after `elapsedMs`: its reservation becomes what it really took. */
  settle(grant: Grant, elapsedMs: number): void {
    if (this.#held.delete(grant.id)) this.#settledMs += Math.max(0, Math.round(elapsedMs));
  }
}
