/**
 * The live output frame both sides share: bytes travel as they are (a NUL stays one byte), the
 * header says where in its stream they start, and anything malformed is a reason, never a crash.
 */
import { describe, expect, it } from 'vitest';
import { LIVE_FRAME_DATA_BYTES } from '../../src/contracts/limits.ts';
import { WEBSOCKET_MESSAGE_MAX_BYTES } from '../../src/platform/limits.ts';
import { OUTPUT_FRAME_JOB_ID_MAX_BYTES, allocOutputFrame, decodeOutputFrame, encodeOutputFrame, outputFrameBytes } from '../../src/contracts/output-frame.ts';

describe('live output frames', () => {
  it('carry any bytes with their stream and offset, at one byte per output byte', () => {
    const data = Buffer.alloc(LIVE_FRAME_DATA_BYTES); // NUL bytes: 6 characters each in a JSON string
    data[data.length - 1] = 0xff;
    const frame = encodeOutputFrame({ jobId: 'jöb-1', stream: 'stderr', offset: 15 * 1024 * 1024, data });
    expect(frame.byteLength).toBe(outputFrameBytes('jöb-1', data.length));
    expect(frame.byteLength - data.length).toBeLessThan(300);
    const d = decodeOutputFrame(frame.slice().buffer);
    expect(d.ok).toBe(true);
    if (!d.ok) return;
    expect(d.frame).toMatchObject({ jobId: 'jöb-1', stream: 'stderr', offset: 15 * 1024 * 1024 });
    expect(Buffer.from(d.frame.data).equals(data)).toBe(true);
  });

  it('lets output be read straight into the frame', () => {
    const { frame, data } = allocOutputFrame({ jobId: 'j', stream: 'stdout', offset: 7 }, 3);
    data.set([1, 2, 3]);
    const d = decodeOutputFrame(frame);
    expect(d.ok && [...d.frame.data]).toEqual([1, 2, 3]);
  });

  it('stay below the WebSocket message limit of a Durable Object, and refuse to grow past it', () => {
    expect(outputFrameBytes('j'.repeat(OUTPUT_FRAME_JOB_ID_MAX_BYTES), LIVE_FRAME_DATA_BYTES)).toBeLessThan(WEBSOCKET_MESSAGE_MAX_BYTES);
    expect(() => allocOutputFrame({ jobId: 'j', stream: 'stdout', offset: 0 }, LIVE_FRAME_DATA_BYTES + 1)).toThrow(/0\.\.262144 bytes/);
    expect(() => allocOutputFrame({ jobId: 'j'.repeat(OUTPUT_FRAME_JOB_ID_MAX_BYTES + 1), stream: 'stdout', offset: 0 }, 1)).toThrow(/at most 255 bytes/);
  });

  it('reject malformed frames with a reason', () => {
    const good = encodeOutputFrame({ jobId: 'j', stream: 'stdout', offset: 0, data: Buffer.from('x') });
    const bad = (f: (b: Uint8Array) => void) => {
      const b = good.slice();
      f(b);
      const d = decodeOutputFrame(b);
      return d.ok ? 'accepted' : d.reason;
    };
    expect(bad((b) => (b[0] = 9))).toMatch(/version 9/);
    expect(bad((b) => (b[1] = 2))).toMatch(/stream 2/);
    expect(bad((b) => (b[2] = 200))).toMatch(/ends inside its job id/);
    expect(bad((b) => new DataView(b.buffer).setFloat64(3, -1))).toMatch(/offset/);
    expect(bad((b) => new DataView(b.buffer).setFloat64(3, 1.5))).toMatch(/offset/);
    expect(decodeOutputFrame(new Uint8Array(5))).toMatchObject({ ok: false, reason: expect.stringMatching(/shorter/) });
    const big = new Uint8Array(outputFrameBytes('j', LIVE_FRAME_DATA_BYTES + 1));
    big.set(good.subarray(0, 12));
    expect(decodeOutputFrame(big)).toMatchObject({ ok: false, reason: expect.stringMatching(/at most 262144/) });
  });
});
