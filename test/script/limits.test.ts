/** Script mode's own limits fit the platform's: the isolate's whole report must cross one RPC return. */
import { describe, expect, it } from 'vitest';
import { CONSOLE_MAX_BYTES, REPORT_OVERHEAD_BYTES, RETURN_MAX_BYTES, RPC_MAX_SERIALIZED_BYTES } from '../../src/script/limits.ts';

describe('script limits', () => {
  it('a full console plus a full return value fit in one Workers RPC message (32 MiB)', () => {
    expect(RPC_MAX_SERIALIZED_BYTES).toBe(33_554_432);
    expect(CONSOLE_MAX_BYTES + RETURN_MAX_BYTES + REPORT_OVERHEAD_BYTES).toBeLessThanOrEqual(RPC_MAX_SERIALIZED_BYTES);
  });
});
