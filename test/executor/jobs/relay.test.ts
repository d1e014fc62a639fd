/**
 * The live relay against a sink whose socket the test controls: it reads the spool file, never
 * sends while the socket holds RELAY_MAX_BUFFERED_BYTES or more unsent (so its memory stays
 * bounded whatever the job writes), sends every byte once at its offset and as written (binary
 * frames: random or NUL bytes cost one byte each), and at the job's end neither hangs on a
 * disconnected socket nor drops what a connected one can take.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OutputRelay, type LiveSink } from '../../../executor/jobs/relay.ts';
import { decodeOutputFrame, outputFrameBytes, type OutputFrame } from '../../../src/contracts/output-frame.ts';
import { LIVE_FRAME_DATA_BYTES, RELAY_MAX_BUFFERED_BYTES } from '../../../src/contracts/limits.ts';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'gh-relay-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A socket that writes nothing until `drain` is called: what a slow edge looks like to the agent. */
function slowSocket() {
  const frames: OutputFrame[] = [];
  let queued = 0;
  let maxQueuedAtSend = 0;
  let connected = true;
  const sink: LiveSink = {
    sendFrame(f) {
      if (!connected) return false;
      maxQueuedAtSend = Math.max(maxQueuedAtSend, queued);
      const d = decodeOutputFrame(f);
      if (!d.ok) throw new Error(d.reason);
      frames.push({ ...d.frame, data: Buffer.from(d.frame.data) });
      queued += f.byteLength;
      return true;
    },
    buffered: () => (connected ? queued : null),
  };
  return {
    sink,
    frames,
    drain: () => {
      queued = 0;
    },
    get queued() {
      return queued;
    },
    get maxQueuedAtSend() {
      return maxQueuedAtSend;
    },
    disconnect: () => {
      connected = false;
    },
  };
}

const until = async (cond: () => boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('live output relay', () => {
  it('sends only while the socket has room: a stalled socket stops it at the bound, a drained one lets it go on', async () => {
    const path = join(dir, 'nul.stdout');
    const total = 8 * 1024 * 1024;
    writeFileSync(path, Buffer.alloc(total)); // NUL bytes: one byte each on the wire
    const s = slowSocket();
    const relay = new OutputRelay('j1', s.sink, { intervalMs: 1, pollMs: 1 });
    relay.track('stdout', path, total);
    relay.available('stdout', total);
    await until(() => s.frames.length > 0);
    await new Promise((r) => setTimeout(r, 100));
    // Stalled: it went up to the bound and stopped there.
    expect(s.queued).toBeGreaterThanOrEqual(RELAY_MAX_BUFFERED_BYTES);
    expect(s.maxQueuedAtSend).toBeLessThan(RELAY_MAX_BUFFERED_BYTES);
    const sentWhileStalled = relay.sent('stdout');
    expect(sentWhileStalled).toBeLessThan(RELAY_MAX_BUFFERED_BYTES + LIVE_FRAME_DATA_BYTES);
    // The socket drains: it goes on, still never past the bound, until everything is sent.
    const finished = relay.finish();
    while (relay.sent('stdout') < total) {
      s.drain();
      await new Promise((r) => setTimeout(r, 2));
    }
    await finished;
    expect(s.maxQueuedAtSend).toBeLessThan(RELAY_MAX_BUFFERED_BYTES);
    let at = 0;
    for (const f of s.frames) {
      expect(f.offset).toBe(at);
      expect(f.data.byteLength).toBeLessThanOrEqual(LIVE_FRAME_DATA_BYTES);
      at += f.data.byteLength;
    }
    expect(at).toBe(total);
  });

  it('relays at most its limit, and both streams take turns', async () => {
    const out = join(dir, 'a.stdout');
    const err = join(dir, 'a.stderr');
    writeFileSync(out, Buffer.alloc(3 * LIVE_FRAME_DATA_BYTES, 'o'));
    writeFileSync(err, 'e\n');
    const s = slowSocket();
    const relay = new OutputRelay('j2', s.sink, { intervalMs: 1, pollMs: 1 });
    relay.track('stdout', out, 2 * LIVE_FRAME_DATA_BYTES + 10);
    relay.track('stderr', err, 1000);
    relay.available('stdout', 3 * LIVE_FRAME_DATA_BYTES);
    relay.available('stderr', 2);
    await relay.finish();
    expect(relay.sent('stdout')).toBe(2 * LIVE_FRAME_DATA_BYTES + 10);
    expect(relay.sent('stderr')).toBe(2);
    // stderr's line is not held back behind stdout's flood.
    expect(s.frames.findIndex((f) => f.stream === 'stderr')).toBeLessThan(2);
  });

  it("at the job's end does not wait for a socket that is gone (it would hang here)", async () => {
    const path = join(dir, 'gone.stdout');
    writeFileSync(path, Buffer.alloc(4 * LIVE_FRAME_DATA_BYTES));
    const s = slowSocket();
    s.disconnect();
    const relay = new OutputRelay('j3', s.sink, { intervalMs: 1 });
    relay.track('stdout', path, 4 * LIVE_FRAME_DATA_BYTES);
    relay.available('stdout', 4 * LIVE_FRAME_DATA_BYTES);
    await new Promise((r) => setTimeout(r, 20)); // the pump is now waiting for a socket
    await relay.finish();
    expect(s.frames).toHaveLength(0);
  });

  it('carries random and NUL-heavy bytes as written: the frames on the socket are the output plus their headers, within 1.05 ×', async () => {
    const out = join(dir, 'bin.stdout');
    const err = join(dir, 'bin.stderr');
    const nulHeavy = Buffer.alloc(LIVE_FRAME_DATA_BYTES + 17);
    for (let i = 0; i < nulHeavy.byteLength; i += 5) nulHeavy[i] = i % 32; // control characters among the NULs
    const outBytes = Buffer.concat([randomBytes(2 * LIVE_FRAME_DATA_BYTES + 3), Buffer.alloc(LIVE_FRAME_DATA_BYTES), nulHeavy]);
    const errBytes = Buffer.concat([nulHeavy, randomBytes(LIVE_FRAME_DATA_BYTES - 1)]);
    writeFileSync(out, outBytes);
    writeFileSync(err, errBytes);
    let onSocket = 0;
    const frames: OutputFrame[] = [];
    const sink: LiveSink = {
      sendFrame(f) {
        onSocket += f.byteLength;
        const d = decodeOutputFrame(f);
        if (!d.ok) throw new Error(d.reason);
        frames.push({ ...d.frame, data: Buffer.from(d.frame.data) });
        return true;
      },
      buffered: () => 0,
    };
    const jobId = 'job_binary';
    const relay = new OutputRelay(jobId, sink, { intervalMs: 1, pollMs: 1 });
    relay.track('stdout', out, outBytes.byteLength);
    relay.track('stderr', err, errBytes.byteLength);
    relay.available('stdout', outBytes.byteLength);
    relay.available('stderr', errBytes.byteLength);
    await relay.finish();
    for (const [stream, bytes] of [
      ['stdout', outBytes],
      ['stderr', errBytes],
    ] as const) {
      const mine = frames.filter((f) => f.stream === stream);
      expect(mine.map((f) => f.offset)).toEqual(mine.map((_, i) => mine.slice(0, i).reduce((n, f) => n + f.data.byteLength, 0)));
      expect(Buffer.concat(mine.map((f) => f.data)).equals(bytes)).toBe(true);
    }
    const output = outBytes.byteLength + errBytes.byteLength;
    expect(onSocket).toBe(output + frames.length * outputFrameBytes(jobId, 0));
    expect(onSocket / output).toBeLessThanOrEqual(1.05);
  });
});
